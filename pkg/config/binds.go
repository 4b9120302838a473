package config

import (
	"fmt"
	"net/netip"
)

// bindsCollide reports whether two listening sockets, one bound to a and one
// to b, cannot both exist: run would fail on the second with "address
// already in use". That is the case on the same port when the addresses are
// equal or one of them is the wildcard of the other's family.
//
// The families never collide with each other: l4lb binds "[::]:P" with
// IPV6_V6ONLY (pkg/listener uses the tcp6 network for IPv6), so it takes
// IPv6 only and "0.0.0.0:P" may sit beside it. Within a family the wildcard
// collides with every specific address even though every socket has
// SO_REUSEPORT, because pkg/listener first probes the address with a plain
// bind to refuse joining another process's port, and that probe fails.
// a and b come from parseAddr, so IPv4-mapped IPv6 is already plain IPv4,
// as pkg/listener binds it.
func bindsCollide(a, b netip.AddrPort) bool {
	if a.Port() != b.Port() || a.Addr().Is4() != b.Addr().Is4() {
		return false
	}
	return a.Addr() == b.Addr() || a.Addr().IsUnspecified() || b.Addr().IsUnspecified()
}

// collisionReason says why two colliding binds cannot coexist.
func collisionReason(a, b netip.AddrPort) string {
	if a.Addr() == b.Addr() {
		return fmt.Sprintf("both listen on %s", a)
	}
	wild := a
	if !wild.Addr().IsUnspecified() {
		wild = b
	}
	family := "IPv4"
	if wild.Addr().Is6() {
		family = "IPv6"
	}
	return fmt.Sprintf("%s already takes port %d on every local %s address, so the second bind would fail with \"address already in use\"; bind the wildcard alone or specific addresses only", wild, wild.Port(), family)
}

// checkBinds reports listeners whose binds collide with an earlier
// listener's, and an admin endpoint whose address collides with a
// listener's: run could not open them all. Only sockets of one protocol
// collide: a TCP and a UDP listener may share an address and port, and the
// admin endpoint (TCP) collides with TCP listeners only.
func checkBinds(c *collector, cfg *Config) {
	binds := make([]netip.AddrPort, len(cfg.Listeners))
	valid := make([]bool, len(cfg.Listeners))
	for i, l := range cfg.Listeners {
		ap, err := parseAddr(l.Bind, roleListen)
		if err != nil {
			continue // reported where the listener was decoded
		}
		binds[i], valid[i] = ap, true
		for j := range i {
			if !valid[j] || cfg.Listeners[j].Protocol != l.Protocol || !bindsCollide(ap, binds[j]) {
				continue
			}
			key := joinKey(indexKey("listener", i), "bind")
			if ap == binds[j] {
				c.add(key, "duplicate bind %q: listener[%d] (line %d) already listens on %s", l.Bind, j, cfg.Listeners[j].Line, ap)
			} else {
				c.add(key, "bind %q collides with listener[%d] %q (line %d): %s", l.Bind, j, cfg.Listeners[j].Bind, cfg.Listeners[j].Line, collisionReason(ap, binds[j]))
			}
			break
		}
	}
	if cfg.Admin.Listen == "" {
		return
	}
	ap, err := parseAddr(cfg.Admin.Listen, roleListen)
	if err != nil {
		return
	}
	for j, l := range cfg.Listeners {
		if !valid[j] || l.Protocol != ProtocolTCP || !bindsCollide(ap, binds[j]) {
			continue
		}
		if !c.written("admin.listen") {
			// The default address: the listener is what the file says.
			c.add(joinKey(indexKey("listener", j), "bind"), "bind %q collides with the admin endpoint's default address %q: %s; move the listener or set [admin] listen", l.Bind, cfg.Admin.Listen, collisionReason(binds[j], ap))
			return
		}
		if ap == binds[j] {
			c.add("admin.listen", "%q is also the bind of listener[%d] (line %d): the admin endpoint needs its own address", cfg.Admin.Listen, j, cfg.Listeners[j].Line)
		} else {
			c.add("admin.listen", "%q collides with listener[%d] %q (line %d): %s", cfg.Admin.Listen, j, cfg.Listeners[j].Bind, cfg.Listeners[j].Line, collisionReason(ap, binds[j]))
		}
		return
	}
}
