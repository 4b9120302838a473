package config

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// maxNameLen bounds listener and pool names, which end up in metric labels,
// log lines and admin API paths.
const maxNameLen = 64

// checkName reports a listener or pool name that would be awkward in a
// metric label or an admin URL path.
func checkName(c *collector, key, name string) {
	switch {
	case name == "":
		c.add(key, "name must not be empty")
	case len(name) > maxNameLen:
		c.add(key, "name %q is longer than %d characters", name, maxNameLen)
	case strings.IndexFunc(name, func(r rune) bool { return !isNameRune(r) }) >= 0:
		c.add(key, "name %q may contain only letters, digits, '.', '_' and '-'", name)
	}
}

func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// checkBackendsDistinct reports two backends of one pool at the same
// address, or with the same identity (which hashing could not tell apart).
// keys[i] is the canonical key of backends[i].
func checkBackendsDistinct(c *collector, backends []Backend, keys []string) {
	addrs := map[netip.AddrPort]int{}
	idents := map[string]int{}
	for i, b := range backends {
		addrDup := false
		if ap, err := parseAddr(b.Addr, roleDial); err == nil {
			if j, ok := addrs[ap]; ok {
				addrDup = true
				c.add(joinKey(keys[i], "addr"), "duplicate backend %q: same address as %s (line %d)", b.Addr, keys[j], backends[j].Line)
			} else {
				addrs[ap] = i
			}
		}
		if b.Identity() == "" {
			continue // addr missing: already reported
		}
		j, ok := idents[b.Identity()]
		switch {
		case !ok:
			idents[b.Identity()] = i
		case b.ID != "":
			c.add(joinKey(keys[i], "id"), "duplicate backend id %q: already the identity of %s (line %d)", b.ID, keys[j], backends[j].Line)
		case !addrDup:
			c.add(joinKey(keys[i], "addr"), "address %q is already the id of %s (line %d): hashing could not tell them apart; give one a distinct id", b.Addr, keys[j], backends[j].Line)
		}
	}
}

// checkMaglevSize reports a Maglev table size that is not prime or too
// small to give every backend a slot.
func checkMaglevSize(c *collector, key string, size, backends int) {
	if !isPrime(size) {
		c.add(key, "%d is not prime: Maglev needs a prime table size%s", size, primeHint(size))
		return
	}
	if size < backends {
		c.add(key, "%d is smaller than the number of backends (%d): use a prime at least 100 times larger%s", size, backends, primeHint(backends*100))
	}
}

// checkWeights reports a pool whose every backend has weight 0: weight 0
// takes no new connections under every algorithm, so every client would be
// refused. The error goes on the last weight, the one that completed it.
func checkWeights(c *collector, backends []Backend, keys []string) {
	if len(backends) == 0 {
		return
	}
	for _, b := range backends {
		if b.Weight > 0 {
			return
		}
	}
	c.add(joinKey(keys[len(keys)-1], "weight"), "every backend of the pool has weight 0, which takes no new connections, so every client would be refused; give at least one backend a weight above 0")
}

// checkBackups reports a pool whose every backend is a backup: a backup
// stands in for the primaries while none is usable, so a pool of backups
// alone says nothing a pool of plain backends would not, and is most
// likely a backup = true copied once too often. The error goes on the
// last backup key.
func checkBackups(c *collector, backends []Backend, keys []string) {
	if len(backends) == 0 {
		return
	}
	for _, b := range backends {
		if !b.Backup {
			return
		}
	}
	c.add(joinKey(keys[len(keys)-1], "backup"), "every backend of the pool is a backup (backup = true), so there is no primary for them to stand in for; remove backup = true from the backends that should serve normally")
}

// checkRingSize reports a consistent-hash ring too large to build: it has
// ring_vnodes points per unit of weight, and pkg/hashring refuses more than
// MaxRingPoints (tens of bytes each) when run builds the pool.
func checkRingSize(c *collector, key string, vnodes int, backends []Backend) {
	total := 0
	for _, b := range backends {
		total += b.Weight
	}
	if points := vnodes * total; points > MaxRingPoints {
		c.add(key, "the consistent-hash ring would have %d points (ring_vnodes %d x total weight %d), more than the %d allowed: lower ring_vnodes or the weights", points, vnodes, total, MaxRingPoints)
	}
}

// primeHint suggests the next prime at or above n, if it is allowed.
func primeHint(n int) string {
	for p := max(n, 2); p <= MaxMaglevTableSize; p++ {
		if isPrime(p) {
			return fmt.Sprintf(", e.g. %d", p)
		}
	}
	return ""
}

// poolUse is what the listeners naming a pool make of it: the protocol it
// serves, and the first of them, for messages.
type poolUse struct {
	// protocol is "tcp" or "udp"; "" when the listeners naming the pool
	// disagree or one names an unknown protocol (both reported on the
	// listener), and then no key of the pool is judged by protocol.
	protocol string
	listener int    // index of the first listener naming the pool; -1: none
	what     string // how messages name that listener
}

// poolUses works out, from the listeners and their routes, the protocol
// of every pool they name. A pool none names is absent: see useOf.
func poolUses(listeners []Listener) map[string]poolUse {
	uses := map[string]poolUse{}
	note := func(pool, protocol string, listener int, what string) {
		u, seen := uses[pool]
		switch {
		case !seen:
			uses[pool] = poolUse{protocol: protocol, listener: listener, what: what}
		case u.protocol != protocol:
			u.protocol = ""
			uses[pool] = u
		}
	}
	for i, l := range listeners {
		protocol := l.Protocol
		if !slices.Contains(Protocols(), protocol) {
			protocol = ""
		}
		what := fmt.Sprintf("%s listener[%d] %q (line %d)", l.Protocol, i, l.Name, l.Line)
		if l.Pool != "" {
			note(l.Pool, protocol, i, what)
		}
		for r, rt := range l.Routes {
			if rt.Pool != "" {
				note(rt.Pool, protocol, i, fmt.Sprintf("route[%d] (line %d) of %s", r, rt.Line, what))
			}
		}
	}
	return uses
}

// useOf is the use of pool name: TCP when no listener names it.
func useOf(uses map[string]poolUse, name string) poolUse {
	if u, ok := uses[name]; ok {
		return u
	}
	return poolUse{protocol: ProtocolTCP, listener: -1}
}

// notFor says why key, a key of the other protocol's pools, is refused in
// this pool, and what this pool uses instead.
func (u poolUse) notFor(key, instead string) string {
	other := "UDP"
	if u.protocol == ProtocolUDP {
		other = "TCP"
	}
	serves := "no listener names this pool, so it is a TCP pool"
	if u.listener >= 0 {
		serves = "this pool serves " + u.what
	}
	return fmt.Sprintf("%s is for %s pools, and %s: %s", key, other, serves, instead)
}

// crossCheck runs the checks that compare tables with each other: unique
// listener names, listeners naming existing pools, one protocol per pool,
// binds that can all be opened together (admin endpoint included), and no
// backend that is l4lb itself by an address every host has (CheckHost adds
// the host's own).
func crossCheck(c *collector, cfg *Config) {
	names := map[string]int{}
	served := map[string]int{} // pool name -> the first listener naming it
	for i, l := range cfg.Listeners {
		key := indexKey("listener", i)
		if l.Name != "" {
			if j, ok := names[l.Name]; ok {
				c.add(joinKey(key, "name"), "duplicate listener name %q: already used by listener[%d] (line %d)", l.Name, j, cfg.Listeners[j].Line)
			} else {
				names[l.Name] = i
			}
		}
		if l.Pool == "" {
			continue
		}
		if _, ok := cfg.Pools[l.Pool]; !ok {
			c.add(joinKey(key, "pool"), "pool %q is not defined; %s", l.Pool, definedPools(cfg))
			continue
		}
		j, ok := served[l.Pool]
		if !ok {
			served[l.Pool] = i
			continue
		}
		first := cfg.Listeners[j]
		if first.Protocol != l.Protocol && slices.Contains(Protocols(), first.Protocol) && slices.Contains(Protocols(), l.Protocol) {
			c.add(joinKey(key, "pool"), "pool %q is also served by %s listener[%d] %q (line %d), and this listener is %s: a pool serves one protocol: define a second pool with the same backends", l.Pool, first.Protocol, j, first.Name, first.Line, l.Protocol)
		}
	}
	checkRoutePools(c, cfg)
	checkSNIHashing(c, cfg)
	checkBinds(c, cfg)
	checkSelfDials(c, cfg, isLoopback)
}

func definedPools(cfg *Config) string {
	if len(cfg.PoolNames) == 0 {
		return "no [pool.NAME] table is defined"
	}
	return "defined pools: " + strings.Join(cfg.PoolNames, ", ")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
