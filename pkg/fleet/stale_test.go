package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// The seed article's demo 2 across two processes: a success of a dial that
// began under an older generation must never close the breaker that a
// later trip opened, however stale the instance that reports it.

// staleCfg trips on one failure and waits long enough that no probe of its
// own interferes (the instances have no Probe anyway).
var staleCfg = trips(1, time.Minute, defaultBreaker.MaxCooldown)

// assertOpenAt checks the server and a Store read (a third instance's) both
// say open at gen.
func assertOpenAt(t *testing.T, h *fleetHarness, key string, gen uint64) {
	t.Helper()
	if raw := h.raw(key); !raw.Open || raw.Gen != gen || raw.OpenGen != gen {
		t.Fatalf("redis holds %+v, want open at generation %d", raw, gen)
	}
	st, err := h.checker().Read(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Open || st.Generation != gen {
		t.Fatalf("Store.Read = %+v, want open at generation %d", st, gen)
	}
}

// A's close and second trip, the middle of the demo: A's snapshot is open
// at gen 1; a successful force-try closes (gen 2), a failed client dial
// trips again (gen 3).
func closeAndTripAgain(t *testing.T, a *instance) {
	t.Helper()
	a.b.Done(a.b.Begin(breaker.KindForce), breaker.Success)
	waitState(t, a, "closed by its force-try", isClosedAt(2))
	a.b.Done(a.b.Begin(breaker.KindClient), breaker.Failure)
	waitState(t, a, "tripped again", isOpenAt(3))
}

// B's snapshot is held at A's first trip (B's Run is not running, so
// nothing refreshes it); B begins a force-try there. A closes and trips
// again. B's success then arrives: B's own snapshot says open at gen 1, so
// B asks the Store to close gen 1, and Redis refuses: it is open at gen 3.
func TestSeedDemo2_HeldStaleForceTryCannotCloseSecondTrip(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.0.3:80"
	bOps := newOpCounter()
	a := h.instance("A", h.store(nil, Options{}), key, staleCfg, nil)
	b := h.instance("B", h.store(nil, Options{Observe: bOps.observe}), key, staleCfg, nil)
	h.start(nil, a)

	tripOn(t, a) // gen 1
	if err := b.b.Refresh(h.ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.b.State(); !st.Open || st.Generation != 1 {
		t.Fatalf("B's snapshot %+v, want open at generation 1", st)
	}
	forceOnB := b.b.Begin(breaker.KindForce)
	if forceOnB.Generation != 1 {
		t.Fatalf("B's force-try captured generation %d, want 1", forceOnB.Generation)
	}

	closeAndTripAgain(t, a) // gen 2, gen 3
	if st := b.b.State(); st.Generation != 1 {
		t.Fatalf("B's snapshot moved to %+v while held", st)
	}

	// B decides on its stale snapshot (open, gen 1): the close is queued
	// for its Run, which asks the Store to close generation 1.
	b.b.Done(forceOnB, breaker.Success)
	h.start(nil, b)
	testnet.Eventually(t, "B's stale close counted", func() bool { return b.ev.n("stale") >= 1 })
	waitState(t, b, "catches up with the Store", isOpenAt(3))

	assertOpenAt(t, h, key, 3)
	if n := bOps.n("close"); n != 1 {
		t.Fatalf("B asked Redis to close %d times, want 1 (refused)", n)
	}
	if n := b.ev.n("close"); n != 0 {
		t.Fatalf("B closed the breaker %d times on a gen-1 success", n)
	}
	if n := b.ev.n("stale"); n != 1 {
		t.Fatalf("B counted %d stale results, want 1", n)
	}
	if b.b.Allow() || a.b.Allow() {
		t.Fatalf("client dials allowed: A %v, B %v", a.b.Allow(), b.b.Allow())
	}
}

// Both instances live: B follows A by invalidations. A force-try B began
// at gen 1 and a client dial B began at gen 2 (between A's close and its
// second trip) both succeed after the second trip: both are stale, the
// breaker stays open at gen 3.
func TestSeedDemo2_LiveStaleSuccessesCannotCloseSecondTrip(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.0.4:80"
	bOps := newOpCounter()
	a := h.instance("A", h.store(nil, Options{}), key, staleCfg, nil)
	b := h.instance("B", h.store(nil, Options{Observe: bOps.observe}), key, staleCfg,
		func(o *breaker.Options) { o.SnapshotRefresh = time.Hour })
	h.start(nil, a)
	bCtx, stopB := context.WithCancel(h.ctx)
	waitB := h.start(bCtx, b)

	tripOn(t, a)
	waitState(t, b, "sees A's first trip", isOpenAt(1))
	forceOnB := b.b.Begin(breaker.KindForce)

	a.b.Done(a.b.Begin(breaker.KindForce), breaker.Success)
	waitState(t, a, "closed by its force-try", isClosedAt(2))
	waitState(t, b, "sees A's close", isClosedAt(2))
	clientOnB := b.b.Begin(breaker.KindClient)

	a.b.Done(a.b.Begin(breaker.KindClient), breaker.Failure)
	waitState(t, a, "tripped again", isOpenAt(3))
	waitState(t, b, "sees A's second trip", isOpenAt(3))

	if forceOnB.Generation != 1 || clientOnB.Generation != 2 {
		t.Fatalf("B's dials captured generations %d and %d, want 1 and 2", forceOnB.Generation, clientOnB.Generation)
	}
	b.b.Done(forceOnB, breaker.Success)
	b.b.Done(clientOnB, breaker.Success)
	if n := b.ev.n("stale"); n != 2 {
		t.Fatalf("B counted %d stale results, want 2", n)
	}
	// Nothing was queued for B's Run. Once Run has returned, whatever was
	// queued has been asked of Redis or counted dropped.
	stopB()
	waitB()
	assertOpenAt(t, h, key, 3)
	if n := bOps.n("close"); n != 0 {
		t.Fatalf("B asked Redis to close %d times", n)
	}
	if n := b.ev.n("dropped"); n != 0 {
		t.Fatalf("B queued %d transitions for its stale results", n)
	}
	if n := b.ev.n("close"); n != 0 {
		t.Fatalf("B closed the breaker %d times", n)
	}
}
