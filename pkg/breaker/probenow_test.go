package breaker

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// ProbeNow skips the rest of the cooldown; a success closes by the same
// compare-and-set as the timed probe.
func TestProbeNowClosesBeforeCooldownEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 30 * time.Second}, nil)
		stop := run(f.b)
		defer stop()
		trip(t, f.b)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probed %d times during the cooldown", n)
		}
		f.b.ProbeNow()
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probes after ProbeNow = %d, want 1", n)
		}
		if st := f.storeState(); st.Open || st.Generation != 2 {
			t.Fatalf("successful early probe did not close: %+v", st)
		}
	})
}

// An early probe that fails is a failed probe like any other: re-open with
// the doubled cooldown and the alert (rule 4).
func TestProbeNowFailureReopensWithAlert(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 30 * time.Second}, nil)
		stop := run(f.b)
		defer stop()
		trip(t, f.b)
		f.probe.answer(Failure)
		f.b.ProbeNow()
		synctest.Wait()
		st := f.storeState()
		if !st.Open || st.Generation != 2 || st.Cooldown != 60*time.Second {
			t.Fatalf("failed early probe: state %+v, want open, generation 2, cooldown 60s", st)
		}
		if f.ev.n("probe_failure") != 1 || f.logs.count(slog.LevelWarn) != 1 {
			t.Fatalf("alert: probe failures %d, warn lines %d; want 1, 1", f.ev.n("probe_failure"), f.logs.count(slog.LevelWarn))
		}
	})
}

// A closed breaker has nothing to probe, and the request does not linger:
// a later trip waits out its cooldown as usual.
func TestProbeNowOnClosedBreakerIsMoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 30 * time.Second}, nil)
		stop := run(f.b)
		defer stop()
		f.b.ProbeNow()
		synctest.Wait()
		trip(t, f.b)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probes = %d: a request made while closed carried over to the next trip", n)
		}
	})
}

// Rule 5: an operator's request does not probe a disabled backend either.
func TestProbeNowSkipsDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		stop := run(f.b)
		defer stop()
		trip(t, f.b)
		if err := f.b.Disable(t.Context()); err != nil {
			t.Fatal(err)
		}
		f.b.ProbeNow()
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probed a disabled backend %d times", n)
		}
	})
}

// Requests while a probe is in flight make no second probe.
func TestProbeNowStaysSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		f.probe.hold = make(chan struct{})
		stop := run(f.b)
		defer stop()
		trip(t, f.b)
		f.b.ProbeNow()
		synctest.Wait()
		for range 10 {
			f.b.ProbeNow()
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probes in flight = %d, want 1", n)
		}
		close(f.probe.hold)
		synctest.Wait()
		if f.storeState().Open {
			t.Fatal("held probe's success did not close")
		}
	})
}

// The seed scenario with an early probe about: a client dial that began
// before the trip and succeeds after it is stale even while a ProbeNow is
// pending, and only the probe's own success closes.
func TestProbeNowKeepsStaleRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		f.probe.hold = make(chan struct{})
		stop := run(f.b)
		defer stop()
		pre := f.b.Begin(KindClient)
		trip(t, f.b)
		f.b.ProbeNow()
		synctest.Wait()
		f.b.Done(pre, Success)
		if !f.storeState().Open || f.ev.n("stale") != 1 {
			t.Fatalf("pre-trip success: open %v stale %d; want open, 1 stale", f.storeState().Open, f.ev.n("stale"))
		}
		close(f.probe.hold)
		synctest.Wait()
		if f.storeState().Open {
			t.Fatal("probe success did not close")
		}
	})
}

// A request that arrives while a probe is in flight is answered by that
// probe: when it fails, the doubled cooldown holds (no second early probe,
// no second alert).
func TestProbeNowDuringAFailingProbeDoesNotSkipTheDoubledCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 30 * time.Second}, nil)
		f.probe.hold = make(chan struct{})
		f.probe.answer(Failure)
		stop := run(f.b)
		defer stop()
		trip(t, f.b)
		f.b.ProbeNow()
		synctest.Wait() // probing, held
		f.b.ProbeNow()
		close(f.probe.hold)
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probes = %d, want 1: a request made during the failed probe skipped the doubled cooldown", n)
		}
		if f.ev.n("probe_failure") != 1 {
			t.Fatalf("alerts = %d, want 1", f.ev.n("probe_failure"))
		}
	})
}

// Instances sharing a Store that ask for an early probe at the same
// generation make one probe: once it has failed (and re-opened at the next
// generation) the others' requests are moot, and they wait out the new
// cooldown instead of probing a backend the fleet just found down.
func TestProbeNowAtTheSameGenerationProbesOnceAcrossInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 30 * time.Second}, nil)
		others := []*Breaker{f.add(Config{Cooldown: 30 * time.Second}, nil), f.add(Config{Cooldown: 30 * time.Second}, nil)}
		all := append([]*Breaker{f.b}, others...)
		for _, b := range all {
			stop := run(b)
			defer stop()
		}
		trip(t, f.b)
		synctest.Wait()
		for _, b := range all {
			if err := b.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		f.probe.answer(Failure, Failure, Failure)
		for _, b := range all {
			b.ProbeNow()
		}
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probes after three instances asked at one generation: %d, want 1", n)
		}
		if st := f.storeState(); !st.Open || st.Generation != 2 {
			t.Fatalf("after the failed probe: %+v, want open at generation 2", st)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probes during the new cooldown: %d, want still 1", n)
		}
	})
}
