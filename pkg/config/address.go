package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// addrRole says what an address is for, which decides the values that make
// sense for it.
type addrRole int

const (
	roleListen addrRole = iota // a local address to bind (listener, admin)
	roleDial                   // a backend to connect to
)

// parseAddr checks that s is "IP:port" with an IP literal host (IPv6 in
// brackets) and a port in 1..65535, and returns it normalized so that two
// spellings of one socket address compare equal ("[::ffff:127.0.0.1]:80"
// and "127.0.0.1:80"). Names are refused: l4lb never resolves DNS, so the
// address it uses is exactly the one written.
func parseAddr(s string, role addrRole) (netip.AddrPort, error) {
	if s == "" {
		return netip.AddrPort{}, fmt.Errorf("must not be empty; write IP:port, e.g. \"127.0.0.1:8080\" or \"[::1]:8080\"")
	}
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
			return netip.AddrPort{}, fmt.Errorf("%q is not host:port: write an IPv6 address in brackets, e.g. \"[::1]:8080\"", s)
		}
		return netip.AddrPort{}, fmt.Errorf("%q is not host:port, e.g. \"127.0.0.1:8080\" or \"[::1]:8080\"", s)
	}
	port, err := parsePort(portText)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: %w", s, err)
	}
	if host == "" {
		if role == roleListen {
			return netip.AddrPort{}, fmt.Errorf("%q has no host: write 0.0.0.0 (every IPv4 address) or [::] (every address) explicitly", s)
		}
		return netip.AddrPort{}, fmt.Errorf("%q has no host: write the backend's IP address", s)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if looksLikeHostName(host) {
			if role == roleDial {
				return netip.AddrPort{}, fmt.Errorf("%q: host %q must be an IP literal (IPv4 or [IPv6]), not a name: backends found by name go in [pool.NAME.discovery] (dns = \"NAME:PORT\")", s, host)
			}
			return netip.AddrPort{}, fmt.Errorf("%q: host %q must be an IP literal (IPv4 or [IPv6]), not a name: l4lb does not resolve DNS", s, host)
		}
		return netip.AddrPort{}, fmt.Errorf("%q: host %q is not a valid IP address (%s); write IPv4 as four numbers 0..255, e.g. \"10.0.0.1\", or IPv6 in brackets", s, host, parseAddrReason(host, err))
	}
	ip = ip.Unmap()
	switch {
	case ip.IsMulticast():
		return netip.AddrPort{}, fmt.Errorf("%q: %s is a multicast address, which TCP cannot use", s, ip)
	case ip == limitedBroadcast:
		return netip.AddrPort{}, fmt.Errorf("%q: %s is the broadcast address, which TCP cannot use", s, ip)
	case role == roleDial && ip.IsUnspecified():
		return netip.AddrPort{}, fmt.Errorf("%q: %s is the unspecified address, which cannot be dialed; write the backend's own IP", s, ip)
	}
	return netip.AddrPortFrom(ip, port), nil
}

// ParseBackendAddr checks a backend's address as the file's addr is
// checked, for backends that come from elsewhere (the admin API): "IP:port"
// with an IP literal that can be dialed. It returns the address
// normalized.
func ParseBackendAddr(s string) (netip.AddrPort, error) { return parseAddr(s, roleDial) }

// limitedBroadcast is 255.255.255.255, the broadcast address of every
// network: no TCP socket can be bound to it or connect to it. The
// broadcast addresses of particular networks depend on the host's
// interfaces; CheckHost refuses those.
var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// looksLikeHostName reports whether host is shaped like a DNS name (labels
// of letters, digits and '-', the last one not all digits), as opposed to
// a mistyped IP address such as "300.1.2.3" or "10.0.1": the two mistakes
// need different advice.
func looksLikeHostName(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	for _, l := range labels {
		if l == "" || strings.IndexFunc(l, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
		}) >= 0 {
			return false
		}
	}
	last := labels[len(labels)-1]
	return strings.IndexFunc(last, func(r rune) bool { return r < '0' || r > '9' }) >= 0
}

// parseAddrReason is what netip found wrong with host, without the input
// it repeats ("ParseAddr(\"300.1.2.3\"): IPv4 field has value >255").
func parseAddrReason(host string, err error) string {
	return strings.TrimPrefix(err.Error(), "ParseAddr("+strconv.Quote(host)+"): ")
}

func parsePort(s string) (uint16, error) {
	if s == "" {
		return 0, fmt.Errorf("port is missing")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %q is not a number", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s is out of range 1..65535", s)
	}
	return uint16(n), nil
}
