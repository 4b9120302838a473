package pool

import (
	"net/netip"
	"sync/atomic"

	"github.com/l4lb/l4lb/pkg/config"
)

// sources are a pool's local addresses to dial from ([pool.X] source), by
// family: a backend is dialed from the sources of its own family, in turn.
type sources struct {
	v4, v6 []config.Source
	// exhausted counts client dials that found no local port: every
	// source (or the kernel's choice) out of ports toward the backend.
	// A reload's pool of the same name shares it, so the count never goes
	// back to zero.
	exhausted *atomic.Int64
}

func newSources(srcs []config.Source, prev *Pool) *sources {
	s := &sources{exhausted: &atomic.Int64{}}
	if prev != nil {
		s.exhausted = prev.srcs.exhausted
	}
	for _, src := range srcs {
		if src.Addr.Is4() {
			s.v4 = append(s.v4, src)
		} else {
			s.v6 = append(s.v6, src)
		}
	}
	return s
}

// SourcesFor are the local addresses to dial ap from; empty: the kernel
// chooses.
func (p *Pool) SourcesFor(ap netip.AddrPort) []config.Source {
	if ap.Addr().Is4() {
		return p.srcs.v4
	}
	return p.srcs.v6
}

// PortsExhausted is called for a client dial that found no local port
// (EADDRNOTAVAIL from every source): local trouble, no backend blamed.
func (p *Pool) PortsExhausted() { p.srcs.exhausted.Add(1) }

// Exhausted counts such dials (l4lb_pool_ports_exhausted_total).
func (p *Pool) Exhausted() int64 { return p.srcs.exhausted.Load() }

// sourceAddrs lists the pool's source addresses (for the health and probe
// dialer).
func sourceAddrs(srcs []config.Source) []netip.Addr {
	out := make([]netip.Addr, len(srcs))
	for i, s := range srcs {
		out[i] = s.Addr
	}
	return out
}
