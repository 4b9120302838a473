package fleet

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
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

// The release owed by a probe that ended apart reaches Redis only after
// what that probe decided (here a close) is merged. Released first, the
// lock would be gone while Redis still holds the breaker open at the
// generation the probe judged, and another instance could take the lock
// and probe that generation again.
func TestOwedProbeReleaseComesAfterTheMerge(t *testing.T) {
	h, p, a, _ := apartStores(t, Options{})
	const key = "web/10.0.8.4:80"
	ctx := context.Background()
	st, tripped, err := a.Trip(ctx, key, 0, time.Minute, time.Hour)
	if err != nil || !tripped {
		t.Fatalf("A trips in redis: %+v %v %v", st, tripped, err)
	}
	if got, err := a.AcquireProbe(ctx, key, "A", time.Hour); err != nil || !got {
		t.Fatalf("A takes the probe lock in redis: %v %v", got, err)
	}
	cutOff(t, p, a, key)
	if _, closed, err := a.Close(ctx, key, st.Generation); err != nil || !closed {
		t.Fatalf("A's probe succeeds apart and closes: %v %v", closed, err)
	}
	if err := a.ReleaseProbe(ctx, key, "A"); err != nil {
		t.Fatalf("A releases apart: %v", err)
	}
	mon := h.srv.Monitor(t)
	p.Heal()
	rejoined(t, a, "A rejoins")

	ks := keyspace{prefix: testPrefix}
	lock, gen := `"`+ks.key(key, fieldProbe)+`"`, `"`+ks.key(key, fieldGen)+`"`
	isScript := func(l string) bool { return strings.Contains(strings.ToLower(l), `"eval`) }
	var lines []string
	testnet.Eventually(t, "the release reaches redis", func() bool {
		lines = mon.Lines()
		return slices.ContainsFunc(lines, func(l string) bool { return isScript(l) && strings.Contains(l, lock) })
	})
	release := slices.IndexFunc(lines, func(l string) bool { return isScript(l) && strings.Contains(l, lock) })
	merge := slices.IndexFunc(lines, func(l string) bool { return isScript(l) && strings.Contains(l, gen) })
	if merge < 0 || merge > release {
		t.Fatalf("redis ran the owed release (line %d) before the merge of the close (line %d):\n%s",
			release, merge, strings.Join(lines, "\n"))
	}
	// Whatever the merge made of the close (docs/fleet.md, "When Redis is out of reach"),
	// it moved the generation past the one A's probe judged: a probe of
	// that generation, by anyone, is stale from then on.
	if raw := h.raw(key); raw.Gen <= st.Generation {
		t.Fatalf("redis holds %+v after A rejoined, want past generation %d", raw, st.Generation)
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
