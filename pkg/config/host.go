package config

import (
	"net/netip"
	"os"
	"strings"
)

// Host is what CheckHost needs to know about the machine l4lb is to run on.
type Host struct {
	// Addrs are the addresses of the host's interfaces with their networks,
	// as net.InterfaceAddrs reports them.
	Addrs []netip.Prefix
}

// CheckHost checks a parsed configuration against the host it is about to
// run on, for what the file alone cannot tell: a backend that is one of
// l4lb's own listeners through a wildcard bind and an interface address, a
// backend or bind at a local network's broadcast address, an admin
// token file that cannot be read or is empty, an access log file that
// cannot be written, a state file that cannot be kept, [cluster] files
// (the Redis password, TLS CA, certificate and key) and the CA files of
// tls health checks that cannot be read or used. Both `l4lb check` and
// `l4lb run` call it, so what check accepts, run can serve. Problems come
// back as Errors, with the key and line of each, like Parse's.
func (cfg *Config) CheckHost(h Host) error {
	c := &collector{file: cfg.file, pos: cfg.pos}
	isLocal := func(a netip.Addr) bool {
		if a.IsLoopback() {
			return true
		}
		for _, p := range h.Addrs {
			if p.Addr().WithZone("").Unmap() == a {
				return true
			}
		}
		return false
	}
	checkSelfDials(c, cfg, isLocal)
	checkSources(c, cfg, isLocal)
	checkBroadcasts(c, cfg, h.Addrs)
	checkTokenFile(c, cfg.Admin)
	checkAccessFile(c, cfg.Log)
	checkStateFile(c, cfg.Global)
	checkClusterFiles(c, cfg.Cluster)
	checkHealthCAFiles(c, cfg)
	if len(c.errs) > 0 {
		c.errs.sort()
		return c.errs
	}
	return nil
}

// checkBroadcasts reports a bind or backend at the broadcast address of
// one of the host's IPv4 networks: TCP can neither connect to it nor
// receive a connection on it. (255.255.255.255 is refused by Parse.)
func checkBroadcasts(c *collector, cfg *Config, nets []netip.Prefix) {
	broadcastOf := func(ap netip.AddrPort) (netip.Prefix, bool) {
		for _, p := range nets {
			if b, ok := broadcast(p); ok && b == ap.Addr() {
				return p.Masked(), true
			}
		}
		return netip.Prefix{}, false
	}
	for i, l := range cfg.Listeners {
		if ap, err := parseAddr(l.Bind, roleListen); err == nil {
			if p, ok := broadcastOf(ap); ok {
				c.add(joinKey(indexKey("listener", i), "bind"), "%q: %s is the broadcast address of local network %s, which TCP cannot use", l.Bind, ap.Addr(), p)
			}
		}
	}
	for _, name := range cfg.PoolNames {
		backendsKey := joinKey(joinKey("pool", name), "backend")
		for i, b := range cfg.Pools[name].Backends {
			if ap, err := parseAddr(b.Addr, roleDial); err == nil {
				if p, ok := broadcastOf(ap); ok {
					c.add(joinKey(indexKey(backendsKey, i), "addr"), "%q: %s is the broadcast address of local network %s, which TCP cannot use", b.Addr, ap.Addr(), p)
				}
			}
		}
	}
}

// broadcast returns the directed broadcast address of an IPv4 network. A
// /31 (point-to-point, RFC 3021) and a /32 have none.
func broadcast(p netip.Prefix) (netip.Addr, bool) {
	a := p.Addr().Unmap()
	if !a.Is4() || p.Bits() < 0 || p.Bits() > 30 {
		return netip.Addr{}, false
	}
	b := a.As4()
	for i := range b {
		netBits := min(max(p.Bits()-8*i, 0), 8) // of this byte
		b[i] |= byte(0xff >> netBits)
	}
	return netip.AddrFrom4(b), true
}

// checkTokenFile reports an admin token file run could not use: one it
// cannot read, an empty one (an empty token protects nothing), or one no
// HTTP header can carry. With the endpoint off the file is unused.
func checkTokenFile(c *collector, a Admin) {
	if a.Listen == "" || a.TokenFile == "" {
		return
	}
	data, err := os.ReadFile(a.TokenFile)
	if err != nil {
		c.add("admin.token_file", "cannot read the admin token: %v", err)
		return
	}
	token := strings.TrimSpace(string(data))
	switch {
	case token == "":
		c.add("admin.token_file", "%q is empty: write the token the POST routes are to require", a.TokenFile)
	case strings.ContainsFunc(token, func(r rune) bool { return r < ' ' || r == 0x7f }):
		c.add("admin.token_file", "%q holds control characters (several lines?): an Authorization header cannot carry them", a.TokenFile)
	}
}
