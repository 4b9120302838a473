package pool

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
)

// The breaker alert's signal (l4lb_breaker_probe_failed) says a recovery
// probe of this outage failed: set by a failed probe, kept through its
// re-open, cleared by a close (this instance's, or one read from the
// fleet) and by the next trip, so an outage after a recovery never
// inherits the last one's failures.
func TestProbeFailedSinceOpen(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte("[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:1\"\npool = \"p\"\n[pool.p]\n[pool.p.health]\nenabled = false\n[[pool.p.backend]]\naddr = \"127.0.0.1:20000\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg.Pools["p"], Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	b := p.backends[0]
	ev := p.breakerEvents(b)
	key := p.Name + "/" + b.ID
	open := breaker.State{Generation: 1, Open: true, Cooldown: time.Second}
	closed := breaker.State{Generation: 2}
	steps := []struct {
		what string
		do   func()
		want bool
	}{
		{"trip", func() { ev.Trip(key, open) }, false},
		{"failed probe", func() { ev.ProbeFailure(key) }, true},
		{"re-open", func() { ev.Reopen(key, breaker.State{Generation: 2, Open: true, Cooldown: 2 * time.Second}) }, true},
		{"close", func() { ev.Close(key, closed) }, false},
		{"second trip", func() { ev.Trip(key, breaker.State{Generation: 3, Open: true, Cooldown: time.Second}) }, false},
		{"failed probe", func() { ev.ProbeFailure(key) }, true},
		{"close read from the fleet", func() { ev.Changed(key, breaker.State{Generation: 4}) }, false},
		{"trip read from the fleet", func() { ev.Changed(key, breaker.State{Generation: 5, Open: true, Cooldown: time.Second}) }, false},
	}
	for _, s := range steps {
		s.do()
		if got := b.ProbeFailedSinceOpen(); got != s.want {
			t.Fatalf("after %s: probe failed since open %v, want %v", s.what, got, s.want)
		}
	}
}
