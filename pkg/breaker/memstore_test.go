package breaker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// The Store contract itself is TestMemoryStore_Contract (contract_test.go,
// the storetest suite). What is MemoryStore's own: a nil clock is time.Now,
// and TTLs are exact deadlines on it.
func TestMemoryStore_NilClockIsTimeNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryStore(nil)
		s.Trip(ctx, "k", 0, 10*time.Second, 9*time.Second)
		s.AcquireProbe(ctx, "k", "a", 6*time.Second)
		time.Sleep(4 * time.Second)
		st, _ := s.Read(ctx, "k")
		if st.CooldownLeft != 5*time.Second || st.Cooldown != 10*time.Second || !st.Open {
			t.Fatalf("after 4s: %+v", st)
		}
		time.Sleep(2*time.Second - time.Nanosecond)
		if got, _ := s.AcquireProbe(ctx, "k", "b", time.Second); got {
			t.Fatal("probe lock free 1ns before its TTL")
		}
		time.Sleep(time.Nanosecond)
		if got, _ := s.AcquireProbe(ctx, "k", "b", time.Second); !got {
			t.Fatal("probe lock held at its TTL")
		}
		time.Sleep(3 * time.Second)
		st, _ = s.Read(ctx, "k")
		if st.CooldownLeft != 0 || !st.Open || st.Generation != 1 {
			t.Fatalf("run-out cooldown: %+v (stays open until a close)", st)
		}
	})
}
