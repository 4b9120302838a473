package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Source is one local address a TCP pool dials its backends from, with an
// optional range of local ports ([pool.NAME] source).
type Source struct {
	Addr netip.Addr
	// PortLo and PortHi bound the local ports (IP_LOCAL_PORT_RANGE); both
	// 0: the host's ip_local_port_range.
	PortLo, PortHi uint16
}

// String is the source as written in the file's canonical form.
func (s Source) String() string {
	a := s.Addr.String()
	if s.Addr.Is6() {
		a = "[" + a + "]"
	}
	if s.PortLo == 0 {
		return a
	}
	return fmt.Sprintf("%s:%d-%d", a, s.PortLo, s.PortHi)
}

// parseSource reads "ADDR", "ADDR:LO-HI", "[V6]" or "[V6]:LO-HI".
func parseSource(s string) (Source, error) {
	const examples = `e.g. "192.0.2.10", "192.0.2.10:20000-40000" or "[2001:db8::10]"`
	if s == "" {
		return Source{}, fmt.Errorf("must not be empty: write a local address, %s", examples)
	}
	host, ports := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Source{}, fmt.Errorf("%q: a '[' without its ']', %s", s, examples)
		}
		host, ports = s[1:end], s[end+1:]
		if ports != "" {
			if !strings.HasPrefix(ports, ":") {
				return Source{}, fmt.Errorf("%q: after ']' comes \":LO-HI\" or nothing, %s", s, examples)
			}
			ports = ports[1:]
		}
	case strings.Count(s, ":") == 1:
		host, ports, _ = strings.Cut(s, ":")
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return Source{}, fmt.Errorf("%q is not an IP address (l4lb never resolves names), %s", s, examples)
	}
	if a.Zone() != "" {
		return Source{}, fmt.Errorf("%q has a zone: a source address must not", s)
	}
	a = a.Unmap()
	if a.IsUnspecified() || a.IsMulticast() || (a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return Source{}, fmt.Errorf("%q cannot be a source: it must be one of this host's unicast addresses", s)
	}
	src := Source{Addr: a}
	if ports == "" {
		return src, nil
	}
	lo, hi, ok := strings.Cut(ports, "-")
	l, err1 := strconv.ParseUint(lo, 10, 16)
	h, err2 := strconv.ParseUint(hi, 10, 16)
	if !ok || err1 != nil || err2 != nil || l == 0 || l > h {
		return Source{}, fmt.Errorf("%q: the port range must be LO-HI with 1 <= LO <= HI <= 65535, %s", s, examples)
	}
	src.PortLo, src.PortHi = uint16(l), uint16(h)
	return src, nil
}

// decodeSources reads [pool.NAME] source: the local addresses a TCP pool
// dials from, each reported at its own key.
func decodeSources(t *table, p *Pool, tcp bool, notFor string) {
	if t.misplaced("source", tcp, "%s", notFor) {
		return
	}
	var ss []string
	if !t.strs("source", &ss) {
		return
	}
	key := t.keyOf("source")
	seen := map[netip.Addr]int{}
	for i, s := range ss {
		src, err := parseSource(s)
		if err != nil {
			t.c.add(indexKey(key, i), "%v", err)
			continue
		}
		if j, dup := seen[src.Addr]; dup {
			t.c.add(indexKey(key, i), "%s appears again: already %s (line %d); one entry per address", src.Addr, indexKey(key, j), t.c.pos.line(indexKey(key, j)))
			continue
		}
		seen[src.Addr] = i
		p.Sources = append(p.Sources, src)
	}
}

// checkSources reports a source address that is not one of this host's:
// bind(2) would fail on every dial.
func checkSources(c *collector, cfg *Config, isLocal func(netip.Addr) bool) {
	for _, name := range cfg.PoolNames {
		key := joinKey(joinKey("pool", name), "source")
		for i, s := range cfg.Pools[name].Sources {
			if !isLocal(s.Addr) {
				c.add(indexKey(key, i), "%s is not an address of this host: l4lb could not dial from it", s.Addr)
			}
		}
	}
}
