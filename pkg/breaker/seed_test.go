package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// Seed demo 1: a dial begun before the trip succeeds after it. The naive
// breaker closed 1.85s after opening; this one must stay open and count the
// result as stale.
func TestSeedDemo1_InFlightSuccessAfterTripIsStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		start := time.Now()
		slow := f.b.Begin(KindClient) // t=0, upstream still healthy
		for _, at := range []time.Duration{50, 100, 150} {
			time.Sleep(start.Add(at * time.Millisecond).Sub(time.Now()))
			dial(f.b, KindClient, Failure)
		}
		if !f.storeState().Open {
			t.Fatal("3 refused dials at 50/100/150ms did not trip")
		}
		time.Sleep(start.Add(2000 * time.Millisecond).Sub(time.Now()))
		f.b.Done(slow, Success) // t=2000: the slow dial returns
		st := f.storeState()
		if !st.Open || st.Generation != 1 || f.b.Allow() {
			t.Fatalf("in-flight success changed the breaker: %+v", st)
		}
		if f.ev.n("stale") != 1 || f.ev.n("close") != 0 {
			t.Fatalf("stale=%d close=%d, want 1 and 0", f.ev.n("stale"), f.ev.n("close"))
		}
	})
}

// Seed demo 2: two instances share a Store; instance A's snapshot is held
// stale at the first trip. A success of a dial begun between the first and
// the second trip must not close the second.
func TestSeedDemo2_StaleSnapshotSuccessDoesNotCloseSecondTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 1}, nil)
		workerA := f.b // never refreshed after the first trip: held stale
		workerB := f.add(Config{Failures: 1}, nil)

		dial(workerB, KindClient, Failure) // t=0: 1st trip, gen 1
		if err := workerA.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := workerA.State(); !s.Open || s.Generation != 1 {
			t.Fatalf("A's snapshot = %+v, want open gen 1", s)
		}

		time.Sleep(100 * time.Millisecond)
		forceOnA := workerA.Begin(KindForce) // t=100: captures gen 1 from A's stale view

		time.Sleep(100 * time.Millisecond)     // t=200
		dial(workerB, KindProbe, Success)      // 1st breaker closes: gen 2
		clientOnB := workerB.Begin(KindClient) // begun between the trips, at gen 2
		dial(workerB, KindClient, Failure)     // 2nd trip: gen 3
		if st := f.storeState(); !st.Open || st.Generation != 3 {
			t.Fatalf("store after 2nd trip = %+v, want open gen 3", st)
		}

		time.Sleep(50 * time.Millisecond) // t=250
		workerA.Done(forceOnA, Success)   // A still thinks gen 1 is current
		workerB.Done(clientOnB, Success)
		if st := f.storeState(); !st.Open || st.Generation != 3 {
			t.Fatalf("2nd trip closed by an old success: %+v", st)
		}
		if f.ev.n("close") != 1 || f.ev.n("stale") != 2 {
			t.Fatalf("close=%d stale=%d, want 1 (the probe) and 2", f.ev.n("close"), f.ev.n("stale"))
		}
		// A learnt the truth from the Store while deciding.
		if s := workerA.State(); s.Generation != 3 || !s.Open {
			t.Fatalf("A's snapshot after the failed CAS = %+v", s)
		}
	})
}
