package main

import (
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// policies builds each listener's relay.Policy (relay.PolicyFor), keeping
// the per-source Limiter of a listener whose limits a reload leaves as
// they were (prev: the running policies by listener name).
func policies(cfg *config.Config, prev map[string]*relay.Policy) map[string]*relay.Policy {
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
