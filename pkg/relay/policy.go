package relay

import (
	"net/netip"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/ipset"
	"github.com/l4lb/l4lb/pkg/srclimit"
)

// Policy is what a listener checks of a client before any dial: who may
// send a PROXY header, who may connect at all, and how much each source
// may take. A reload swaps it whole (Front.SetPolicy); a connection keeps
// the verdicts it was given.
type Policy struct {
	// AcceptProxy: the client side speaks the PROXY protocol; only peers
	// in Trusted may, and the header must arrive within ProxyTimeout.
	AcceptProxy  bool
	Trusted      ipset.Set
	ProxyTimeout time.Duration
	// Allow (when not empty) and Deny are checked against the client's
	// address (the original one when it came in a PROXY header); deny
	// wins.
	Allow, Deny ipset.Set
	// Sources caps connections and their rate per client address; nil:
	// no per-source limit. SourceLimits is what it was built from, so a
	// reload that keeps the limits keeps the Limiter and its counts.
	Sources      *srclimit.Limiter
	SourceLimits srclimit.Config
}

// PolicyFor is the Policy of listener l, nil when l checks nothing. prev
// is the running Policy of the listener of that name (nil at start): when
// l's per-source limits are what prev was built from, its Limiter is
// kept, so the connections open now stay counted against their sources
// and a reload cannot let a source past its cap.
func PolicyFor(l config.Listener, prev *Policy) *Policy {
	p := &Policy{
		AcceptProxy: l.AcceptProxy, Trusted: ipset.New(l.TrustedProxies), ProxyTimeout: l.ProxyTimeout,
		Allow: ipset.New(l.Allow), Deny: ipset.New(l.Deny),
		SourceLimits: srclimit.Config{
			MaxConns: l.MaxConnsPerSource, Rate: l.RatePerSource, Burst: l.BurstPerSource,
			IPv4Prefix: l.SourceIPv4Prefix, IPv6Prefix: l.SourceIPv6Prefix,
		},
	}
	if prev != nil && prev.Sources != nil && prev.SourceLimits == p.SourceLimits {
		p.Sources = prev.Sources
	} else {
		p.Sources = srclimit.New(p.SourceLimits)
	}
	if !p.AcceptProxy && p.Allow.Empty() && p.Deny.Empty() && p.Sources == nil {
		return nil // nothing to check: no policy, no cost
	}
	return p
}

// admit is the access control and per-source verdict for a client at a
// (unmapped): CloseCompleted means admitted (and, with per-source limits,
// counted until release).
func (p *Policy) admit(a netip.Addr) CloseReason {
	if p == nil {
		return CloseCompleted
	}
	if p.Deny.Contains(a) || !p.Allow.Empty() && !p.Allow.Contains(a) {
		return CloseDenied
	}
	switch p.Sources.Admit(a, p.Sources.Now()) {
	case srclimit.OverConns:
		return CloseSourceConnections
	case srclimit.OverRate:
		return CloseSourceRate
	}
	return CloseCompleted
}

// trusted reports whether a peer may send a PROXY header.
func (p *Policy) trusted(a netip.Addr) bool { return p.Trusted.Contains(a) }
