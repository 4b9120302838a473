package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// decodeDiscovery reads [pool.NAME.discovery]. Nothing is resolved here:
// check and run accept the same file whatever DNS says today.
func decodeDiscovery(t *table) *Discovery {
	d := DefaultDiscovery()
	d.Line = t.c.pos.line(t.key)
	dnsSet, srvSet := t.written("dns"), t.written("srv")
	dnsOK, srvOK := t.str("dns", &d.DNS), t.str("srv", &d.SRV)
	switch {
	case dnsSet && srvSet:
		t.c.add(t.keyOf("srv"), "dns and srv are both set: a pool's discovery looks up one name, by its A/AAAA records (dns) or its SRV records (srv)")
	case !dnsSet && !srvSet:
		t.c.add(t.key, "[%s] names nothing to look up: set dns = \"NAME:PORT\" or srv = \"_service._proto.NAME\"", t.key)
	case dnsSet && dnsOK:
		if err := checkDNSTarget(d.DNS); err != nil {
			t.c.add(t.keyOf("dns"), "%v", err)
		}
	case srvSet && srvOK:
		if err := checkSRVName(d.SRV); err != nil {
			t.c.add(t.keyOf("srv"), "%v", err)
		}
	}
	var resolvers []string
	if t.strs("resolvers", &resolvers) {
		d.Resolvers = nil
		for _, r := range resolvers {
			ap, err := parseResolver(r)
			if err != nil {
				t.c.add(t.keyOf("resolvers"), "%v", err)
				continue
			}
			d.Resolvers = append(d.Resolvers, ap.String())
		}
	}
	t.durationIn("timeout", &d.Timeout)
	minOK := t.durationIn("min_refresh", &d.MinRefresh)
	if t.durationIn("max_refresh", &d.MaxRefresh) && minOK && d.MaxRefresh < d.MinRefresh {
		t.c.add(t.keyOf("max_refresh"), "max_refresh %v is shorter than min_refresh %v", d.MaxRefresh, d.MinRefresh)
	}
	t.durationIn("empty_grace", &d.EmptyGrace)
	t.oneOf("family", &d.Family, "family (of addresses)")
	if !t.misplaced("weight", !srvSet, "SRV records carry each target's weight") {
		t.integer("weight", &d.Weight)
	}
	t.integer("max_connections", &d.MaxConnections)
	t.boolean("backup", &d.Backup)
	t.done()
	return &d
}

// checkDNSTarget checks dns = "NAME:PORT".
func checkDNSTarget(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not NAME:PORT, e.g. \"web.svc.example.test:9001\"", s)
	}
	if _, err := parsePort(port); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return fmt.Errorf("%q: %s is an address, not a name: list it as a [[backend]] instead", s, host)
	}
	return checkDNSName(host)
}

// checkSRVName checks srv = "_service._proto.NAME" (RFC 2782).
func checkSRVName(s string) error {
	labels := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(labels) < 3 || !strings.HasPrefix(labels[0], "_") || !strings.HasPrefix(labels[1], "_") {
		return fmt.Errorf("%q is not an SRV name: write \"_service._proto.NAME\", e.g. \"_web._tcp.svc.example.test\"", s)
	}
	return checkDNSName(strings.Join([]string{strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_"), strings.Join(labels[2:], ".")}, "."))
}

// checkDNSName checks a domain name: labels of letters, digits, '-' and
// '_', 1-63 bytes each, 253 in all.
func checkDNSName(name string) error {
	n := strings.TrimSuffix(name, ".")
	if n == "" || len(n) > 253 {
		return fmt.Errorf("%q is not a DNS name: 1-253 characters", name)
	}
	for _, l := range strings.Split(n, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("%q is not a DNS name: each dot-separated label has 1-63 characters", name)
		}
		if i := strings.IndexFunc(l, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}); i >= 0 {
			return fmt.Errorf("%q is not a DNS name: %q may not appear in a label", name, l[i])
		}
	}
	return nil
}

// parseResolver reads "IP" or "IP:PORT" (IPv6 in brackets with a port).
func parseResolver(s string) (netip.AddrPort, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), 53), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolver %q is not IP or IP:PORT (IPv6 with a port in brackets, e.g. \"[::1]:53\")", s)
	}
	if ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("resolver %q: port 0", s)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}
