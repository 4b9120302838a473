package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// catchUp runs when Redis is behind the local copy, which is when Redis is
// slow or failing over: its two round trips must not hold up the breakers
// of every other key. Here Redis answers nothing (a stalled proxy, a
// timeout far beyond the test) while one key's read is catching up; a read
// of another key, answered from the client-side cache, completes all the
// same, while the catch-up is still waiting for Redis.
func TestCatchUpHoldsNoOtherKeyUp(t *testing.T) {
	h := newFleet(t)
	proxy := startProxy(t, h.srv.Addr)
	s := h.store(func(c *Config) { c.RedisURL, c.Timeout = proxy.URL(), 10*time.Minute }, Options{})
	const behind, other = "web/10.0.6.1:80", "web/10.0.6.2:80"
	ctx := context.Background()
	for _, key := range []string{behind, other} {
		if _, err := s.Read(ctx, key); err != nil { // both closed, and cached
			t.Fatal(err)
		}
	}
	// The local copy ahead of what Redis (and the cache) holds: what a
	// failover to a replica that missed the last writes leaves.
	s.local.Mirror(behind, breaker.State{Generation: 7})

	proxy.Stall()
	caught := make(chan struct{})
	h.goRun(h.ctx, func(ctx context.Context) {
		defer close(caught)
		_, _ = s.Read(ctx, behind) // from the cache, then catchUp's read from the server
	})
	testnet.Eventually(t, "the catch-up's read is sent and held", func() bool { return proxy.held.Load() > 0 })

	read := make(chan error, 1)
	h.goRun(h.ctx, func(ctx context.Context) {
		_, err := s.Read(ctx, other)
		read <- err
	})
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("read of %s: %v", other, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a read of %s answered by the cache waited for the catch-up of %s, held in Redis", other, behind)
	}
	select {
	case <-caught:
		t.Fatalf("the catch-up of %s returned while Redis answered nothing: the test proves nothing", behind)
	default:
	}
	proxy.Heal() // the held call fails; the Store rejoins
	<-caught
}
