package config

import (
	"fmt"
	"net/netip"
)

// A backend that is one of l4lb's own listening addresses makes every
// client connection dial l4lb again, which accepts it as a new client and
// dials again, until the connection cap: one client was seen to cause ~9,700
// self-connections a second. These checks refuse such a configuration.

// dialReaches reports whether a connection to backend would be accepted by
// a socket bound to bind on this host. isLocal says whether an address
// belongs to this host; it is asked only about addresses a wildcard bind
// covers.
func dialReaches(bind, backend netip.AddrPort, isLocal func(netip.Addr) bool) bool {
	if bind.Port() != backend.Port() {
		return false
	}
	b, d := bind.Addr(), backend.Addr()
	if b == d {
		return true
	}
	// "[::]:P" is IPv6 only (see bindsCollide), so a wildcard covers its
	// own family's local addresses only.
	return b.IsUnspecified() && b.Is4() == d.Is4() && isLocal(d.WithZone(""))
}

// isLoopback is the part of "local" that holds on every host: Linux
// answers all of 127.0.0.0/8 on lo, and ::1.
func isLoopback(a netip.Addr) bool { return a.IsLoopback() }

// checkSelfDials reports every backend, of any pool, that would reach one
// of l4lb's own listeners (of any pool) or its admin endpoint. A pool
// reaches only sockets of its own protocol: a UDP backend on the port of a
// TCP listener is another socket, and the admin endpoint is TCP.
func checkSelfDials(c *collector, cfg *Config, isLocal func(netip.Addr) bool) {
	var binds []boundSocket
	for i, l := range cfg.Listeners {
		if ap, err := parseAddr(l.Bind, roleListen); err == nil {
			binds = append(binds, boundSocket{ap, l.Protocol, fmt.Sprintf("listener[%d] %q (bind %q, line %d)", i, l.Name, l.Bind, l.Line)})
		}
	}
	var admin netip.AddrPort
	if cfg.Admin.Listen != "" {
		admin, _ = parseAddr(cfg.Admin.Listen, roleListen)
	}
	for _, name := range cfg.PoolNames {
		protocol := cfg.Pools[name].Protocol
		loop := "l4lb would connect to itself, in a loop, for every client"
		if protocol == ProtocolUDP {
			loop = "l4lb would send to itself, in a loop, for every datagram"
		}
		backendsKey := joinKey(joinKey("pool", name), "backend")
		for i, b := range cfg.Pools[name].Backends {
			ap, err := parseAddr(b.Addr, roleDial)
			if err != nil {
				continue // reported where the backend was decoded
			}
			key := joinKey(indexKey(backendsKey, i), "addr")
			if msg := selfDial(ap, protocol, binds, isLocal); msg != "" {
				c.add(key, "backend %q %s: %s", b.Addr, msg, loop)
				continue
			}
			if admin.IsValid() && protocol == ProtocolTCP && dialReaches(admin, ap, isLocal) {
				c.add(key, "backend %q is l4lb's own admin endpoint (admin.listen %q, line %d): clients would reach the admin API through the pool", b.Addr, cfg.Admin.Listen, c.pos.line("admin.listen"))
			}
		}
	}
}

// boundSocket is a listener's address, with how messages name it.
type boundSocket struct {
	ap       netip.AddrPort
	protocol string
	what     string
}

// selfDial says which of binds of protocol a dial to backend reaches, or "".
func selfDial(backend netip.AddrPort, protocol string, binds []boundSocket, isLocal func(netip.Addr) bool) string {
	for _, b := range binds {
		if b.protocol != protocol || !dialReaches(b.ap, backend, isLocal) {
			continue
		}
		if b.ap == backend {
			return "is the address of " + b.what
		}
		where := "an address of this host"
		if backend.Addr().IsLoopback() {
			where = "a loopback address"
		}
		return fmt.Sprintf("is %s, where %s accepts too", where, b.what)
	}
	return ""
}
