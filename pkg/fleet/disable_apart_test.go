package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
)

// A disable made through Redis must hold in the local copy too: if Redis
// is cut off before anything re-reads the key, the instance decides alone
// on its local copy, and rule 5 says nothing automatic re-enables a
// manually disabled backend.
func TestDisableThroughRedisHoldsWhileApart(t *testing.T) {
	h := newFleet(t)
	p := startProxy(t, h.srv.Addr)
	s := h.store(func(c *Config) {
		c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, time.Hour
	}, Options{})
	const key = "web/10.0.9.1:80"
	ctx := context.Background()
	if err := s.Disable(ctx, key); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	testnet.Eventually(t, "store decides locally", func() bool {
		st, err := s.Read(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Up() && !st.Disabled {
			t.Fatalf("apart, the local copy says %+v: the disable made through redis is lost", st)
		}
		return !s.Up()
	})
}

// A key that A only disabled while apart must not have A's mirrored (and
// by then stale) open entry written back: B closed the breaker in Redis
// meanwhile on fresh evidence, and A decided nothing about it.
func TestDisableApartDoesNotReopenStaleMirror(t *testing.T) {
	h := newFleet(t)
	p := startProxy(t, h.srv.Addr)
	a := h.store(func(c *Config) {
		c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, time.Hour
	}, Options{Clock: clock.NewFake(time.Now())})
	b := h.store(nil, Options{})
	const key = "web/10.0.9.2:80"
	ctx := context.Background()
	st, done, err := b.Trip(ctx, key, 0, time.Minute, time.Minute)
	if err != nil || !done {
		t.Fatalf("B trips: %+v %v %v", st, done, err)
	}
	if st, err := a.Read(ctx, key); err != nil || !st.Open {
		t.Fatalf("A reads %+v %v", st, err)
	}
	p.Cut()
	testnet.Eventually(t, "A decides locally", func() bool {
		_, _ = a.Read(ctx, key)
		return !a.Up()
	})
	if err := a.Disable(ctx, key); err != nil {
		t.Fatal(err)
	}
	if st, done, err := b.Close(ctx, key, st.Generation); err != nil || !done {
		t.Fatalf("B closes: %+v %v %v", st, done, err)
	}
	p.Heal()
	rejoined(t, a, "A rejoins")
	raw := h.raw(key)
	if raw.Open || !raw.Disabled {
		t.Fatalf("redis after the merge: %+v; want closed (B's close stands) and disabled (A's disable added)", raw)
	}
}
