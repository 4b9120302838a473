package fleet

import (
	"context"
	"testing"
	"time"
)

// A probe that ends while its instance is apart cannot release the lock it
// took in Redis before the outage; the release is owed, and made before
// Redis decides for the instance again. Otherwise the lock outlives the
// probe in Redis, and nobody probes the backend until it expires.
func TestProbeLockReleasedApartIsReleasedInRedisOnReturn(t *testing.T) {
	_, p, a, b := apartStores(t, Options{})
	const key = "web/10.0.8.1:80"
	ctx := context.Background()
	if got, err := a.AcquireProbe(ctx, key, "A", time.Hour); err != nil || !got {
		t.Fatalf("A takes the probe lock in redis: %v %v", got, err)
	}
	cutOff(t, p, a, key)
	if err := a.ReleaseProbe(ctx, key, "A"); err != nil {
		t.Fatalf("A releases apart: %v", err)
	}
	p.Heal()
	rejoined(t, a, "A rejoins")
	if got, err := b.AcquireProbe(ctx, key, "B", time.Hour); err != nil || !got {
		t.Fatalf("B asks for the probe lock after A's probe ended and A rejoined: %v %v; A's lock is still held in redis", got, err)
	}
}

// A probe begun while its instance is apart still runs when Redis answers
// again: its lock must reach Redis before the instance rejoins, or another
// instance takes the lock in Redis and probes the same backend at once.
func TestProbeLockTakenApartHoldsInRedisAfterReturn(t *testing.T) {
	_, p, a, b := apartStores(t, Options{})
	const key = "web/10.0.8.2:80"
	ctx := context.Background()
	cutOff(t, p, a, key)
	if got, err := a.AcquireProbe(ctx, key, "A", time.Hour); err != nil || !got {
		t.Fatalf("A takes its local probe lock apart: %v %v", got, err)
	}
	if a.Up() {
		t.Fatal("A rejoined through a cut proxy")
	}
	p.Heal()
	rejoined(t, a, "A rejoins")
	if got, err := b.AcquireProbe(ctx, key, "B", time.Hour); err != nil || got {
		t.Fatalf("B asks for the probe lock while A's probe still runs: %v %v; want refused (two probes of one backend at once)", got, err)
	}
	if err := a.ReleaseProbe(ctx, key, "A"); err != nil {
		t.Fatalf("A's probe ends: %v", err)
	}
	if got, err := b.AcquireProbe(ctx, key, "B", time.Hour); err != nil || !got {
		t.Fatalf("B asks for the probe lock after A's probe ended: %v %v", got, err)
	}
}

// A lock another instance holds in Redis holds for this one when it goes
// apart with the other's probe still running (Redis's master died under
// it): deciding alone, it must not probe the same backend beside it. The
// memory lasts the lock's TTL, the bound of the other's probe, and no
// longer.
func TestProbeLockHeldElsewhereHoldsApart(t *testing.T) {
	_, p, a, b := apartStores(t, Options{})
	const key = "web/10.0.8.3:80"
	const ttl = 2 * time.Second
	ctx := context.Background()
	if got, err := b.AcquireProbe(ctx, key, "B", ttl); err != nil || !got {
		t.Fatalf("B takes the probe lock in redis: %v %v", got, err)
	}
	if got, err := a.AcquireProbe(ctx, key, "A", ttl); err != nil || got {
		t.Fatalf("A asks for the lock B holds: %v %v, want refused", got, err)
	}
	asked := time.Now()
	cutOff(t, p, a, key)
	got, err := a.AcquireProbe(ctx, key, "A", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got && time.Since(asked) < ttl {
		t.Fatalf("A, apart %v after it found B's lock (TTL %v), took a lock of its own: two probes of one backend at once", time.Since(asked), ttl)
	}
	time.Sleep(time.Until(asked.Add(ttl)))
	if got, err := a.AcquireProbe(ctx, key, "A", ttl); err != nil || !got {
		t.Fatalf("A, apart after B's lock ran out: %v %v, want its own lock", got, err)
	}
}
