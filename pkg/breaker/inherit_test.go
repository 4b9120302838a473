package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// A reload replaces a backend's breaker (same key, same Store): the failure
// window goes on, so failures before and after the reload trip it together.
func TestInheritCarriesTheFailureWindowAcrossAReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 3, Window: 60 * time.Second}, nil)
		dial(f.b, KindClient, Failure)
		time.Sleep(10 * time.Second)
		dial(f.b, KindClient, Failure)

		next := f.add(Config{Failures: 3, Window: 60 * time.Second}, nil)
		next.Inherit(f.b)
		dial(next, KindClient, Failure)
		if next.Allow() || !f.storeState().Open {
			t.Fatal("two failures before the reload and one after did not trip the new breaker")
		}

		// Without Inherit the same sequence would not trip: the check the
		// test above relies on.
		g := newFixture(t, Config{Failures: 3, Window: 60 * time.Second}, nil)
		dial(g.b, KindClient, Failure)
		dial(g.b, KindClient, Failure)
		fresh := g.add(Config{Failures: 3, Window: 60 * time.Second}, nil)
		dial(fresh, KindClient, Failure)
		if !fresh.Allow() {
			t.Fatal("a breaker that inherited nothing tripped on one failure")
		}
	})
}

// Carried failures still age out by the new breaker's window, and a
// smaller failures count keeps only the latest of them.
func TestInheritedFailuresAgeAndFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 5, Window: 60 * time.Second}, nil)
		for range 4 {
			dial(f.b, KindClient, Failure)
			time.Sleep(time.Second)
		}
		// Narrower window: the four failures are 1-4 s old, so with a 2.5 s
		// window only the last two count, and a third trips.
		next := f.add(Config{Failures: 3, Window: 2500 * time.Millisecond}, nil)
		next.Inherit(f.b)
		if got := len(next.win.failureTimes()); got != 3 {
			t.Fatalf("carried %d failures into a ring of 3, want 3", got)
		}
		time.Sleep(500 * time.Millisecond) // failures now 1.5, 2.5, 3.5 s old
		dial(next, KindClient, Failure)
		if !next.Allow() {
			t.Fatal("tripped although only one carried failure is inside the new window")
		}
		dial(next, KindClient, Failure)
		if next.Allow() {
			t.Fatal("three failures inside the window (one carried) did not trip")
		}
	})
}

// A carried window of a generation that has since moved on is dropped at
// the next result, as any window of an old generation: failures before a
// trip never count towards the next one.
func TestInheritedWindowOfAnOldGenerationIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 3, Window: 60 * time.Second}, nil)
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure)
		other := f.add(Config{Failures: 1}, nil)
		dial(other, KindClient, Failure) // another instance trips it: generation 1
		if !f.storeState().Open {
			t.Fatal("setup: the other breaker did not trip")
		}

		next := f.add(Config{Failures: 3, Window: 60 * time.Second}, nil)
		next.Inherit(f.b)
		if next.win.gen != 0 || next.win.filled != 2 {
			t.Fatalf("carried gen %d with %d failures, want gen 0 with 2", next.win.gen, next.win.filled)
		}
		next.mu.Lock()
		next.win.add(1, time.Now(), true) // a failure of generation 1
		filled := next.win.filled
		next.mu.Unlock()
		if filled != 1 {
			t.Fatalf("after a result of generation 1 the window holds %d failures, want 1 (the carried ones were of generation 0)", filled)
		}
	})
}

// Inherit ignores a breaker of another key (another backend) and itself.
func TestInheritOnlyFromTheSameBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 3}, nil)
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure)
		stranger, err := New("web/127.0.0.1:9999", Config{Failures: 3}.withDefaults(), f.store, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stranger.Inherit(f.b)
		if n := stranger.win.filled; n != 0 {
			t.Fatalf("another backend's breaker took %d failures", n)
		}
		f.b.Inherit(f.b)
		if n := f.b.win.filled; n != 2 {
			t.Fatalf("inheriting from itself left %d failures, want 2", n)
		}
	})
}
