package main

import (
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/loop"
	"github.com/l4lb/l4lb/pkg/sockopt"
	"github.com/l4lb/l4lb/pkg/srclimit"
)

// policies builds each listener's loop.Policy. A listener whose per-source
// limits a reload leaves as they were keeps its Limiter (from prev, the
// running policies by listener name): the connections open now stay
// counted against their sources, so a reload cannot let a source past its
// cap.
func policies(cfg *config.Config, prev map[string]*loop.Policy) map[string]*loop.Policy {
	out := make(map[string]*loop.Policy, len(cfg.Listeners))
	for _, l := range cfg.Listeners {
		p := &loop.Policy{
			AcceptProxy: l.AcceptProxy, Trusted: l.TrustedProxies, ProxyTimeout: l.ProxyTimeout,
			Allow: l.Allow, Deny: l.Deny,
		}
		lim := srclimit.Config{MaxConns: l.MaxConnsPerSource, Rate: l.RatePerSource, Burst: l.BurstPerSource}
		if old := prev[l.Name]; old != nil && old.Sources != nil && old.SourceLimits == lim {
			p.Sources, p.SourceLimits = old.Sources, lim
		} else {
			p.Sources, p.SourceLimits = srclimit.New(lim), lim
		}
		if !p.AcceptProxy && len(p.Allow) == 0 && len(p.Deny) == 0 && p.Sources == nil {
			continue // nothing to check: no policy, no cost
		}
		out[l.Name] = p
	}
	return out
}

// clientKeepalive is a listener's client-side keepalive.
func clientKeepalive(l config.Listener) sockopt.Keepalive {
	return sockopt.Keepalive{Idle: l.Keepalive, Interval: l.KeepaliveInterval, Count: l.KeepaliveCount}
}
