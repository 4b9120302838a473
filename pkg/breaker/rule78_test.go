package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// Rule 7: the cooldown is a duration kept by the Store; an instance whose
// clock is hours off behaves exactly like one whose clock is right.
func TestRule7_NoCrossClockComparison(t *testing.T) {
	for _, skew := range []time.Duration{-5 * time.Hour, 0, 7 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, Config{Cooldown: 20 * time.Second}, func(o *Options) {
					o.Clock = nowClock{now: func() time.Time { return time.Now().Add(skew) }}
				})
				stop := run(f.b)
				defer stop()
				trip(t, f.b)
				if got := f.b.State().CooldownLeft; got != 20*time.Second {
					t.Fatalf("cooldown left = %v, want 20s", got)
				}
				time.Sleep(20*time.Second - time.Millisecond)
				synctest.Wait()
				if f.probe.calls.Load() != 0 {
					t.Fatal("probed early")
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if f.probe.calls.Load() != 1 || !f.b.Allow() {
					t.Fatal("did not probe and close at cooldown end")
				}
			})
		})
	}
}

// Rule 8: the hot path reads a snapshot (refreshed in the background, and
// holdable stale), never the Store.
func TestRule8_HotPathReadsRefreshedSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, func(o *Options) { o.SnapshotRefresh = 200 * time.Millisecond })
		other := f.add(Config{}, nil)
		trip(t, other)
		if !f.b.Allow() {
			t.Fatal("hot path read the Store instead of the snapshot")
		}
		stop := run(f.b)
		defer stop()
		synctest.Wait()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if f.b.Allow() {
			t.Fatal("refresh did not bring the other instance's trip")
		}
	})
}

// Rule 8: a snapshot never rolls back past a transition it already saw.
func TestRule8_SnapshotNeverGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		old := f.storeState() // a slow read taken before the trip
		trip(t, f.b)
		f.b.publish(old)
		if s := f.b.State(); s.Generation != 1 || !s.Open {
			t.Fatalf("snapshot rolled back to %+v", s)
		}
	})
}
