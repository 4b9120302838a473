package main

import (
	"slices"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

// The l4lb-policy variant's config is one l4lb accepts, with the policy on
// every TCP listener and pool and on no UDP one.
func TestL4lbPolicyConfig(t *testing.T) {
	spec := l4lbPolicySystem()
	s := placeSystem(spec, 1, 30000, false)
	cfg, err := config.Parse("l4lb.toml", []byte(l4lbConfigWith(s.routes, 1, "", spec.l4lbKeys)))
	if err != nil {
		t.Fatal(err)
	}
	tcp := 0
	for _, l := range cfg.Listeners {
		if l.Protocol == config.ProtocolUDP {
			if len(l.Allow) != 0 {
				t.Errorf("UDP listener %s got the policy", l.Name)
			}
			continue
		}
		tcp++
		if len(l.Allow) != 4 || len(l.Deny) != 3 || l.MaxConnsPerSource != 1000000 || l.RatePerSource != 1e6 {
			t.Errorf("listener %s: %+v", l.Name, l)
		}
		if p := cfg.Pools[l.Pool]; p.QueueTimeout == 0 {
			t.Errorf("pool %s: no queue_timeout", p.Name)
		}
	}
	if tcp == 0 {
		t.Fatal("no TCP listener")
	}
	o, err := parseFlags(nil)
	if err != nil || slices.Contains(o.systems, sysL4lbPolicy) {
		t.Fatalf("default systems %v (%v): l4lb-policy is opt-in", o.systems, err)
	}
}
