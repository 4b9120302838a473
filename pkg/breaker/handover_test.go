package breaker

import (
	"context"
	"testing"
	"testing/synctest"
)

func asyncOpts(o *Options) { o.Async = true }

// stopped runs b's Run with its context already done, as a reload stops
// the old pool's breakers: Run returns at once, whatever was queued.
func stopped(b *Breaker) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx)
}

// A trip queued for an Async breaker whose Run stops before making it
// goes to the breaker that replaced it, whose Run makes it.
func TestHandOverPassesQueuedTransitionsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 2}, asyncOpts)
		next := f.add(Config{Failures: 2}, asyncOpts)
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure) // the trip waits for Run
		f.b.HandOver(next)
		stopped(f.b)
		if f.storeState().Open {
			t.Fatal("tripped by a Run that was told to stop")
		}
		defer run(next)()
		synctest.Wait()
		if st := f.storeState(); !st.Open || st.Generation != 1 {
			t.Fatalf("store %+v, want open at generation 1: the successor made the trip", st)
		}
		if f.ev.n("dropped") != 0 {
			t.Fatalf("%d transitions counted dropped, want 0", f.ev.n("dropped"))
		}
	})
}

// Results reported to a breaker handed over are judged by its successor:
// under the same key, so a dial from before the trip stays stale, and a
// force-try of the open generation closes it.
func TestHandOverKeepsTheGenerationRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 1}, asyncOpts)
		stopOld := run(f.b)
		preTrip := f.b.Begin(KindClient)
		dial(f.b, KindClient, Failure)
		synctest.Wait()
		if !f.b.State().Open {
			t.Fatal("setup: no trip")
		}
		force := f.b.Begin(KindForce)

		next := f.add(Config{Failures: 1}, asyncOpts)
		defer run(next)()
		f.b.HandOver(next)
		stopOld()
		f.b.Done(preTrip, Success)
		synctest.Wait()
		if st := f.storeState(); !st.Open || f.ev.n("stale") != 1 {
			t.Fatalf("after a pre-trip success: store %+v, %d stale; want open, 1 stale", st, f.ev.n("stale"))
		}
		f.b.Done(force, Success)
		synctest.Wait()
		if st := f.storeState(); st.Open || st.Generation != 2 {
			t.Fatalf("after the force-try's success: store %+v, want closed at generation 2", st)
		}
	})
}

// With no successor (the backend left the configuration) what a stopped
// breaker cannot make is counted dropped: what it had queued, and what
// results ask for afterwards.
func TestStoppedBreakerCountsDroppedTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 2}, asyncOpts)
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure)
		stopped(f.b)
		if got := f.ev.n("dropped"); got != 1 {
			t.Fatalf("%d dropped after Run stopped with a trip queued, want 1", got)
		}
		dial(f.b, KindClient, Failure)
		if got := f.ev.n("dropped"); got != 2 {
			t.Fatalf("%d dropped after one more failure asked for the trip, want 2", got)
		}
		if f.storeState().Open {
			t.Fatal("a stopped breaker tripped")
		}
	})
}

// HandOver refuses another key, itself and a cycle.
func TestHandOverOnlyToAnotherBreakerOfTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		next := f.add(Config{}, nil)
		stranger, err := New("web/127.0.0.1:9999", Config{}.withDefaults(), f.store, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f.b.HandOver(stranger)
		f.b.HandOver(f.b)
		if f.b.current() != f.b {
			t.Fatal("handed over to another key or to itself")
		}
		f.b.HandOver(next)
		next.HandOver(f.b)
		if f.b.current() != next || next.current() != next {
			t.Fatal("a hand-over back formed a cycle")
		}
	})
}
