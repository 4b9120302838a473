package breaker

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// Follow takes another store's report for a key only while this store
// has not moved the key itself since the last report it took (from), and
// only a later generation; it never touches a disable.
func TestFollowTakesOnlyNewsOnKeysNotMovedHere(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(nil)
	open := State{Generation: 1, Open: true, Cooldown: time.Minute, CooldownLeft: 30 * time.Second}

	if !s.Follow("a", 0, open) {
		t.Fatal("a trip reported for a key at the generation last taken was not followed")
	}
	if st, _ := s.Read(ctx, "a"); !st.Open || st.Generation != 1 || st.Cooldown != time.Minute || st.CooldownLeft <= 0 {
		t.Fatalf("after following a trip: %+v", st)
	}
	if s.Follow("a", 1, open) {
		t.Fatal("a report of the generation already held changed the key")
	}
	if !s.Follow("a", 1, State{Generation: 2}) {
		t.Fatal("the other store's close (generation 2) was not followed")
	}
	if st, _ := s.Read(ctx, "a"); st.Open || st.Generation != 2 {
		t.Fatalf("after following a close: %+v", st)
	}

	// This store trips "b" itself: the other store's later reports for b,
	// whatever their generation, no longer apply.
	if _, ok, _ := s.Trip(ctx, "b", 0, time.Minute, time.Minute); !ok {
		t.Fatal("trip")
	}
	if s.Follow("b", 0, State{Generation: 2}) {
		t.Fatal("a close reported by the other store overrode this store's own trip")
	}
	if st, _ := s.Read(ctx, "b"); !st.Open || st.Generation != 1 {
		t.Fatalf("b after a refused follow: %+v", st)
	}

	// A disable is the operator's, kept apart: a report never changes it.
	s.Disable(ctx, "c")
	if !s.Follow("c", 0, State{Generation: 1, Open: true, Cooldown: time.Minute}) {
		t.Fatal("trip of a disabled key not followed")
	}
	if st, _ := s.Read(ctx, "c"); !st.Disabled {
		t.Fatal("following a report cleared a manual disable")
	}
}

// OnChange reports every change the store makes, Follow included, until
// stopped; a CAS that does not take is no change.
func TestOnChangeReportsEveryChange(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(nil)
	var keys []string
	stop := s.OnChange(func(key string) { keys = append(keys, key) })
	s.Trip(ctx, "t", 0, time.Minute, time.Minute)
	s.Trip(ctx, "t", 0, time.Minute, time.Minute) // already open: no change
	s.Reopen(ctx, "t", 1, time.Minute, time.Minute)
	s.Close(ctx, "t", 2)
	s.Close(ctx, "t", 2) // generation moved on: no change
	s.Disable(ctx, "d")
	s.Enable(ctx, "d")
	s.Follow("f", 0, State{Generation: 1, Open: true})
	s.Mirror("m", State{Generation: 4})
	stop()
	s.Trip(ctx, "after", 0, time.Minute, time.Minute)
	if want := []string{"t", "t", "t", "d", "d", "f", "m"}; !slices.Equal(keys, want) {
		t.Fatalf("changes reported %v, want %v", keys, want)
	}
}

// A followed trip reaches a running breaker at once through Watch, not at
// its next snapshot refresh: the new process of an upgrade stops sending
// clients to a backend the old one tripped.
func TestFollowedTripReachesRunningBreakerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemoryStore(nil)
		b, err := New(testKey, Config{}.withDefaults(), s, Options{SnapshotRefresh: time.Hour, Probe: func(context.Context) Result { return Failure }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { b.Run(ctx); close(done) }()
		synctest.Wait()
		if !b.Allow() {
			t.Fatal("a fresh breaker refuses dials")
		}
		s.Follow(testKey, 0, State{Generation: 1, Open: true, Cooldown: time.Minute, CooldownLeft: time.Minute})
		synctest.Wait()
		if b.Allow() || !b.State().Open || b.State().Generation != 1 {
			t.Fatalf("the followed trip did not reach the breaker: %+v", b.State())
		}
		cancel()
		<-done
	})
}
