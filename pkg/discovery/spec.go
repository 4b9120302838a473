package discovery

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// Spec is one discovery block, already validated by config; NewWatcher
// checks it again, since a Spec can be built by hand.
type Spec struct {
	// DNS is "name:port": the A and AAAA records of name, each address
	// with port. Exactly one of DNS and SRV is set.
	DNS string
	// SRV is "_svc._proto.name": targets, ports and weights from its SRV
	// records, each target resolved to its A and AAAA records.
	SRV string
	// Resolvers are "ip:port"; empty: the nameservers of ResolvConf.
	Resolvers []string
	// ResolvConf is the resolv.conf(5) read when Resolvers is empty;
	// "": /etc/resolv.conf. It is read again for every query, so an edited
	// file is followed.
	ResolvConf string
	// MinRefresh and MaxRefresh bound the re-resolve interval, which is
	// otherwise the answer's lowest TTL; 0: DefaultMinRefresh and
	// DefaultMaxRefresh.
	MinRefresh, MaxRefresh time.Duration
	// EmptyGrace is how long the last set is kept while the answers say
	// the name has no records (NXDOMAIN, or none of the wanted types);
	// then the empty set is reported. 0: at once.
	EmptyGrace time.Duration
	// Family is "any" (or ""), "ipv4" (A records only) or "ipv6" (AAAA
	// only).
	Family string
	// Timeout bounds each query to one resolver (UDP, and TCP after a
	// truncated answer, each this long); 0: DefaultTimeout.
	Timeout time.Duration
}

// The defaults of a Spec's zero durations.
const (
	DefaultMinRefresh = time.Second
	DefaultMaxRefresh = 5 * time.Minute
	DefaultTimeout    = 2 * time.Second
)

// DefaultResolvConf is where the resolvers come from when a Spec names
// none.
const DefaultResolvConf = "/etc/resolv.conf"

// family says which address records a lookup asks for.
type family struct{ v4, v6 bool }

// plan is a Spec made ready to run: names fully qualified, defaults
// applied.
type plan struct {
	spec      Spec
	name      string // the fully qualified name queried: DNS's host or SRV
	port      uint16 // DNS's port; 0 for SRV
	srv       bool
	family    family
	resolvers []string // "ip:port" as given; nil: from resolv.conf
}

// compile checks s and fills in its defaults.
func compile(s Spec) (plan, error) {
	p := plan{spec: s}
	switch {
	case s.DNS != "" && s.SRV != "":
		return p, errors.New("discovery: dns and srv are both set: one block resolves one of them")
	case s.DNS != "":
		host, port, err := net.SplitHostPort(s.DNS)
		if err != nil {
			return p, fmt.Errorf("discovery: dns %q: want name:port: %v", s.DNS, err)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return p, fmt.Errorf("discovery: dns %q: port %q is not 1-65535", s.DNS, port)
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return p, fmt.Errorf("discovery: dns %q: %s is an address, not a name (a static backend needs no lookup)", s.DNS, host)
		}
		p.name, p.port = host, uint16(n)
	case s.SRV != "":
		p.name, p.srv = s.SRV, true
	default:
		return p, errors.New("discovery: neither dns nor srv is set")
	}
	if _, ok := dns.IsDomainName(p.name); !ok || p.name == "" || p.name == "." {
		return p, fmt.Errorf("discovery: %q is not a domain name", p.name)
	}
	p.name = dns.Fqdn(p.name)
	switch s.Family {
	case "", "any":
		p.family = family{v4: true, v6: true}
	case "ipv4":
		p.family = family{v4: true}
	case "ipv6":
		p.family = family{v6: true}
	default:
		return p, fmt.Errorf("discovery: family %q: want any, ipv4 or ipv6", s.Family)
	}
	for _, r := range s.Resolvers {
		if _, err := netip.ParseAddrPort(r); err != nil {
			return p, fmt.Errorf("discovery: resolver %q: want ip:port: %v", r, err)
		}
		p.resolvers = append(p.resolvers, r)
	}
	if p.spec.ResolvConf == "" {
		p.spec.ResolvConf = DefaultResolvConf
	}
	if p.spec.MinRefresh == 0 {
		p.spec.MinRefresh = DefaultMinRefresh
	}
	if p.spec.MaxRefresh == 0 {
		p.spec.MaxRefresh = max(DefaultMaxRefresh, p.spec.MinRefresh)
	}
	if p.spec.Timeout == 0 {
		p.spec.Timeout = DefaultTimeout
	}
	switch {
	case p.spec.MinRefresh < 0 || p.spec.MaxRefresh < 0 || p.spec.EmptyGrace < 0 || p.spec.Timeout < 0:
		return p, errors.New("discovery: a negative duration")
	case p.spec.MaxRefresh < p.spec.MinRefresh:
		return p, fmt.Errorf("discovery: max_refresh %v is below min_refresh %v", p.spec.MaxRefresh, p.spec.MinRefresh)
	}
	return p, nil
}
