package server

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// What the server serves, built from a configuration: its pools, checked
// against this host, and the frontends of its listeners with their
// policies.

// BuildPools is everything run makes of a configuration before it opens a
// socket, and everything check does: it checks cfg against this host
// (config.CheckHost: a backend that is l4lb itself through an interface
// address, broadcast addresses, the admin token file) and builds every
// pool with the pool package's own constructor, which is the last word on
// what can be built (a consistent-hash ring too large, say). Both commands
// go through here, so what check accepts, run can build. Pools come back
// in cfg.PoolNames order; nothing runs until Pool.Run. previous holds the
// running pools by name when a reload builds the next ones (nil at start):
// each new pool carries its backends' state from the pool it replaces.
// initialHealth, by pool, is an upgrade's health per backend identity
// (pool.Deps.InitialHealth; nil otherwise).
func BuildPools(cfg *config.Config, deps pool.Deps, previous map[string]*pool.Pool, initialHealth map[string]map[string]bool) ([]*pool.Pool, error) {
	host, err := ThisHost()
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckHost(host); err != nil {
		return nil, err
	}
	pools := make([]*pool.Pool, 0, len(cfg.PoolNames))
	for _, name := range cfg.PoolNames {
		deps.Previous = previous[name]
		deps.InitialHealth = initialHealth[name]
		p, err := pool.New(cfg.Pools[name], deps)
		if err != nil {
			return nil, cfg.PoolError(name, err)
		}
		pools = append(pools, p)
	}
	return pools, nil
}

// PoolsByName indexes pools by name, for Frontends.
func PoolsByName(pools []*pool.Pool) map[string]*pool.Pool {
	out := make(map[string]*pool.Pool, len(pools))
	for _, p := range pools {
		out[p.Name] = p
	}
	return out
}

// Frontends turns cfg's listeners into the server's frontends, in file
// order, each with its built pool (pools by name, from BuildPools): TCP ones
// with their backlog, UDP ones with their session keys.
func Frontends(cfg *config.Config, pools map[string]*pool.Pool, pols map[string]*relay.Policy) ([]Frontend, error) {
	fronts := make([]Frontend, 0, len(cfg.Listeners))
	for _, l := range cfg.Listeners {
		f := Frontend{Name: l.Name, Bind: l.Bind, Protocol: l.Protocol, Pool: pools[l.Pool],
			Policy: pols[l.Name], Keepalive: clientKeepalive(l), NoAccessLog: !l.AccessLog}
		switch l.Protocol {
		case config.ProtocolUDP:
			f.SessionTimeout, f.MaxSessions = l.SessionTimeout, l.MaxSessions
			f.Responses, f.Requests, f.ReuseSockets = l.Responses, l.Requests, l.ReuseSockets
			f.ReceiveBuffer = l.ReceiveBuffer
		default:
			f.Backlog = l.Backlog
			r, err := routing(l, pools)
			if err != nil {
				return nil, err
			}
			f.Routing = r
		}
		fronts = append(fronts, f)
	}
	return fronts, nil
}

// routing is a TCP listener's SNI routes over the built pools; nil
// without routes.
func routing(l config.Listener, pools map[string]*pool.Pool) (*relay.Routing, error) {
	if len(l.Routes) == 0 {
		return nil, nil
	}
	m, err := l.RouteMatcher()
	if err != nil {
		return nil, fmt.Errorf("listener %s: routes: %w", l.Name, err)
	}
	r := &relay.Routing{Match: m.Match, Timeout: l.InspectTimeout,
		Reset: l.OnUnrecognized == config.OnReset, ResetTooLarge: l.OnTooLarge == config.OnReset}
	for _, rc := range l.Routes {
		r.Routes = append(r.Routes, &relay.Route{Name: rc.Name, Pool: pools[rc.Pool]})
	}
	return r, nil
}

// ThisHost lists the addresses of this host's interfaces, which a wildcard
// bind accepts on.
func ThisHost() (config.Host, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return config.Host{}, fmt.Errorf("list this host's addresses: %w", err)
	}
	var h config.Host
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ones, _ := n.Mask.Size()
		h.Addrs = append(h.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return h, nil
}

// Policies builds each listener's relay.Policy (relay.PolicyFor), keeping
// the per-source Limiter of a listener whose limits a reload leaves as
// they were (prev: the running policies by listener name).
func Policies(cfg *config.Config, prev map[string]*relay.Policy) map[string]*relay.Policy {
	out := make(map[string]*relay.Policy, len(cfg.Listeners))
	for _, l := range cfg.Listeners {
		if p := relay.PolicyFor(l, prev[l.Name]); p != nil {
			out[l.Name] = p
		}
	}
	return out
}

// clientKeepalive is a listener's client-side keepalive.
func clientKeepalive(l config.Listener) sockopt.Keepalive {
	return sockopt.Keepalive{Idle: l.Keepalive, Interval: l.KeepaliveInterval, Count: l.KeepaliveCount}
}

// HostAddrs returns a test for this host's own interface addresses, read
// once at start: the data path checks connections between local addresses
// for loops back into l4lb.
func HostAddrs() func(netip.Addr) bool {
	set := map[netip.Addr]struct{}{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					set[ip.Unmap()] = struct{}{}
				}
			}
		}
	}
	return func(a netip.Addr) bool {
		_, ok := set[a.Unmap()]
		return ok
	}
}
