package admin

import (
	"log/slog"
	"net"
	"net/netip"
)

// bindAddr returns the network and address that bind exactly what addr
// asks for. Go's "tcp" on 0.0.0.0 opens a dual-stack socket that also
// accepts IPv6 (it is really [::] without IPV6_V6ONLY), so an IPv4 literal
// binds "tcp4"; an IPv6 literal binds "tcp6", for which Go sets
// IPV6_V6ONLY, so [::] is IPv6 only, as the data path's listeners are. An
// IPv4-mapped IPv6 address is the IPv4 address it maps (pkg/config treats
// the two spellings as one). A host that is not an IP literal (pkg/config
// refuses those) is left to Go's "tcp".
func bindAddr(addr string) (network, address string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "tcp", addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "tcp", addr
	}
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.Is4() {
		return "tcp4", net.JoinHostPort(ip.String(), port)
	}
	return "tcp6", net.JoinHostPort(ip.String(), port)
}

// onLoopback reports whether a bound address is reachable from this host
// only.
func onLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// warnIfExposed says, once at start, what an endpoint beyond loopback
// lets others do: the API disables backends, so whoever can reach it can
// take a pool down, and without a token nothing stops them.
func warnIfExposed(log *slog.Logger, a net.Addr, token string) {
	if onLoopback(a) {
		return
	}
	if token == "" {
		log.Warn("admin endpoint is not on loopback and has no token_file: anyone who can reach it can disable backends (POST routes are unauthenticated); bind it to 127.0.0.1 or set [admin] token_file",
			"addr", a.String())
		return
	}
	log.Warn("admin endpoint is not on loopback: anyone who can reach it can read pool state, metrics and profiles; POST routes that disable backends require the token",
		"addr", a.String())
}
