package breaker

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// Rule 4: a failed probe re-opens with a doubled cooldown and raises exactly
// one alert; the trip itself raises none.
func TestRule4_FailedProbeReopensDoublesAndAlerts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 10 * time.Second, MaxCooldown: 35 * time.Second}, nil)
		f.probe.answer(Failure, Failure, Failure, Success)
		stop := run(f.b)
		defer stop()
		trip(t, f.b)
		if f.logs.count(slog.LevelWarn) != 0 || f.ev.n("probe_failure") != 0 {
			t.Fatal("a trip raised an alert")
		}
		// Probe times and the state each failed probe leaves behind.
		steps := []struct {
			after    time.Duration
			wantGen  uint64
			wantCool time.Duration
		}{
			{10 * time.Second, 2, 20 * time.Second}, // doubled
			{20 * time.Second, 3, 35 * time.Second}, // capped at max_cooldown
			{35 * time.Second, 4, 35 * time.Second}, // stays capped
		}
		for i, s := range steps {
			time.Sleep(s.after - time.Millisecond)
			synctest.Wait()
			if n := f.probe.calls.Load(); n != int64(i) {
				t.Fatalf("step %d: %d probes before the cooldown ran out", i, n)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			st := f.storeState()
			if st.Generation != s.wantGen || st.Cooldown != s.wantCool || st.CooldownLeft != s.wantCool || !st.Open {
				t.Fatalf("step %d: store = %+v, want gen %d cooldown %v", i, st, s.wantGen, s.wantCool)
			}
			if got := f.ev.n("probe_failure"); got != i+1 {
				t.Fatalf("step %d: alerts = %d, want %d", i, got, i+1)
			}
			if got := f.logs.count(slog.LevelWarn); got != i+1 {
				t.Fatalf("step %d: WARN records = %d, want %d", i, got, i+1)
			}
		}
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if st := f.storeState(); st.Open || st.Generation != 5 {
			t.Fatalf("final probe success did not close: %+v", st)
		}
		if f.ev.n("reopen") != 3 || f.ev.n("probe_failure") != 3 {
			t.Fatalf("reopen=%d probe_failure=%d, want 3 and 3", f.ev.n("reopen"), f.ev.n("probe_failure"))
		}
	})
}

func TestRule4_CooldownJitterBounds(t *testing.T) {
	tests := []struct {
		name   string
		rand   float64
		prev   time.Duration // nominal cooldown before the failed probe
		max    time.Duration
		wantTT time.Duration // TTL actually set
	}{
		{"low end -10%", 0, 10 * time.Second, time.Minute, 18 * time.Second},
		{"middle exact", 0.5, 10 * time.Second, time.Minute, 20 * time.Second},
		{"high end just under +10%", 0.999, 10 * time.Second, time.Minute, 21996 * time.Millisecond},
		{"max is a hard ceiling", 0.999, 40 * time.Second, time.Minute, time.Minute},
		{"jitter below the cap", 0, 40 * time.Second, time.Minute, 54 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, Config{Cooldown: tc.prev, MaxCooldown: tc.max}, func(o *Options) {
					o.Rand = func() float64 { return tc.rand }
				})
				trip(t, f.b)
				dial(f.b, KindProbe, Failure)
				st := f.storeState()
				if st.CooldownLeft != tc.wantTT {
					t.Fatalf("cooldown TTL = %v, want %v", st.CooldownLeft, tc.wantTT)
				}
				if want := min(2*tc.prev, tc.max); st.Cooldown != want {
					t.Fatalf("nominal cooldown = %v, want %v (un-jittered, so doubling does not compound jitter)", st.Cooldown, want)
				}
			})
		})
	}
}
