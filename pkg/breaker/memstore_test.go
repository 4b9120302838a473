package breaker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestMemoryStore_CompareAndSet(t *testing.T) {
	ctx := context.Background()
	type op func(s *MemoryStore) (State, bool, error)
	tripAt := func(seen uint64) op {
		return func(s *MemoryStore) (State, bool, error) { return s.Trip(ctx, "k", seen, time.Second, time.Second) }
	}
	closeAt := func(gen uint64) op {
		return func(s *MemoryStore) (State, bool, error) { return s.Close(ctx, "k", gen) }
	}
	reopenAt := func(gen uint64) op {
		return func(s *MemoryStore) (State, bool, error) { return s.Reopen(ctx, "k", gen, time.Second, time.Second) }
	}
	tests := []struct {
		name    string
		setup   []op
		op      op
		wantOK  bool
		wantGen uint64
		wantOp  bool
	}{
		{"trip when closed at seen", nil, tripAt(0), true, 1, true},
		{"trip with an old seen", []op{tripAt(0), closeAt(1)}, tripAt(0), false, 2, false},
		{"trip when already open", []op{tripAt(0)}, tripAt(1), false, 1, true},
		{"close at the open generation", []op{tripAt(0)}, closeAt(1), true, 2, false},
		{"close at an old generation", []op{tripAt(0), reopenAt(1)}, closeAt(1), false, 2, true},
		{"close when closed", nil, closeAt(0), false, 0, false},
		{"reopen at the open generation", []op{tripAt(0)}, reopenAt(1), true, 2, true},
		{"reopen when closed", []op{tripAt(0), closeAt(1)}, reopenAt(1), false, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewMemoryStore(nil)
			for i, o := range tc.setup {
				if _, ok, err := o(s); !ok || err != nil {
					t.Fatalf("setup %d: ok=%v err=%v", i, ok, err)
				}
			}
			st, ok, err := tc.op(s)
			if err != nil || ok != tc.wantOK || st.Generation != tc.wantGen || st.Open != tc.wantOp {
				t.Fatalf("got %+v ok=%v err=%v; want gen %d open %v ok=%v", st, ok, err, tc.wantGen, tc.wantOp, tc.wantOK)
			}
		})
	}
}

// The generation only goes up and survives close/re-open cycles.
func TestMemoryStore_GenerationNeverGoesDownNorIsDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryStore(nil)
		var last uint64
		check := func(st State) {
			t.Helper()
			if st.Generation <= last {
				t.Fatalf("generation %d after %d", st.Generation, last)
			}
			last = st.Generation
		}
		for range 50 {
			st, _, _ := s.Trip(ctx, "k", last, time.Second, time.Second)
			check(st)
			st, _, _ = s.Reopen(ctx, "k", last, time.Second, time.Second)
			check(st)
			time.Sleep(time.Hour) // TTLs long gone: the counter is not a TTL key
			st, _, _ = s.Close(ctx, "k", last)
			check(st)
			if st.Open {
				t.Fatal("close left the entry")
			}
			if got, _ := s.Read(ctx, "k"); got.Generation != last {
				t.Fatalf("read generation %d, want %d", got.Generation, last)
			}
		}
		if last != 150 {
			t.Fatalf("generation after 50 cycles = %d, want 150", last)
		}
	})
}

func TestMemoryStore_CooldownIsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryStore(nil)
		s.Trip(ctx, "k", 0, 10*time.Second, 9*time.Second)
		time.Sleep(4 * time.Second)
		st, _ := s.Read(ctx, "k")
		if st.CooldownLeft != 5*time.Second || st.Cooldown != 10*time.Second || !st.Open {
			t.Fatalf("after 4s: %+v", st)
		}
		time.Sleep(time.Minute)
		st, _ = s.Read(ctx, "k")
		if st.CooldownLeft != 0 || !st.Open {
			t.Fatalf("run-out cooldown: %+v (stays open until a close)", st)
		}
	})
}

func TestMemoryStore_ProbeLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryStore(nil)
		must := func(want bool, owner string) {
			t.Helper()
			if got, err := s.AcquireProbe(ctx, "k", owner, 10*time.Second); got != want || err != nil {
				t.Fatalf("acquire by %s = %v, %v; want %v", owner, got, err, want)
			}
		}
		must(true, "a")
		must(false, "b")
		must(false, "a") // not re-entrant: one probe at a time
		if got, _ := s.AcquireProbe(ctx, "other-key", "b", time.Second); !got {
			t.Fatal("locks are per key")
		}
		s.ReleaseProbe(ctx, "k", "b") // not the owner: no effect
		must(false, "b")
		s.ReleaseProbe(ctx, "k", "a")
		must(true, "b")
		time.Sleep(10 * time.Second) // b crashed: the TTL frees the lock
		must(true, "c")
	})
}

func TestMemoryStore_DisableIsApartFromBreakerEntries(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(nil)
	s.Disable(ctx, "k")
	s.Disable(ctx, "k") // idempotent
	s.Trip(ctx, "k", 0, time.Second, time.Second)
	s.Reopen(ctx, "k", 1, time.Second, time.Second)
	s.Close(ctx, "k", 2)
	if st, _ := s.Read(ctx, "k"); !st.Disabled || st.Open {
		t.Fatalf("after trip/reopen/close: %+v", st)
	}
	if st, _ := s.Read(ctx, "other"); st.Disabled {
		t.Fatal("disable leaked to another key")
	}
	s.Enable(ctx, "k")
	s.Enable(ctx, "k")
	if st, _ := s.Read(ctx, "k"); st.Disabled {
		t.Fatal("enable did not clear")
	}
}

func TestMemoryStore_HonoursCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := NewMemoryStore(nil)
	if _, ok, err := s.Trip(ctx, "k", 0, time.Second, time.Second); err == nil || ok {
		t.Fatalf("trip on canceled ctx: ok=%v err=%v", ok, err)
	}
	if st, _ := s.Read(context.Background(), "k"); st.Open {
		t.Fatal("canceled trip took effect")
	}
}
