package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// Rule 5: manual disable is separate state that nothing automatic undoes.
func TestRule5_DisableSurvivesProbesSuccessesCooldownsCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		stop := run(f.b)
		defer stop()
		if err := f.b.Disable(t.Context()); err != nil {
			t.Fatal(err)
		}
		if f.b.Allow() {
			t.Fatal("disabled backend allowed")
		}
		trip(t, f.b)
		time.Sleep(10 * f.b.Config().Cooldown) // many cooldowns
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probe dialed a disabled backend %d times", n)
		}
		dial(f.b, KindForce, Success) // e.g. a force-try that was in flight
		st := f.storeState()
		if st.Open || !st.Disabled {
			t.Fatalf("after close: %+v, want closed and still disabled", st)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if f.b.Allow() || !f.b.State().Disabled {
			t.Fatal("something automatic re-enabled the backend")
		}
		if err := f.b.Enable(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !f.b.Allow() {
			t.Fatal("Enable did not re-enable")
		}
	})
}

// Disables are per key and visible to every instance sharing the Store.
func TestRule5_DisableSharedThroughStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		other := f.add(Config{}, nil)
		stop := run(other)
		defer stop()
		if err := f.b.Disable(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(snapshotRefresh)
		synctest.Wait()
		if other.Allow() || !other.State().Disabled {
			t.Fatal("other instance does not see the disable")
		}
	})
}

// A probe started from a snapshot that has not seen the disable yet re-reads
// the Store under the lock and does not dial.
func TestRule5_ProbeRechecksDisableInStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		trip(t, f.b)
		time.Sleep(f.b.Config().Cooldown)
		if err := f.store.Disable(t.Context(), testKey); err != nil { // snapshot not refreshed
			t.Fatal(err)
		}
		f.b.probe(t.Context(), false, 0)
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probe dialed a disabled backend %d times", n)
		}
	})
}
