package breaker

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// Rule 6: a force-try's success is recovery even before the cooldown ends; a
// failed one is counted and changes nothing.
func TestRule6_ForceTrySuccessClosesBeforeCooldownEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		trip(t, f.b)
		time.Sleep(time.Second)
		if f.b.State().CooldownLeft == 0 {
			t.Fatal("cooldown already over; test proves nothing")
		}
		dial(f.b, KindForce, Success)
		if st := f.storeState(); st.Open || st.Generation != 2 {
			t.Fatalf("force-try success did not close: %+v", st)
		}
	})
}

func TestRule6_FailedForceTryChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		trip(t, f.b)
		before := f.storeState()
		time.Sleep(time.Second)
		dial(f.b, KindForce, Failure)
		after := f.storeState()
		before.CooldownLeft -= time.Second
		if after != before {
			t.Fatalf("failed force-try changed state: %+v -> %+v", before, after)
		}
		if f.ev.dial("force/failure") != 1 {
			t.Fatal("failed force-try not counted")
		}
		if f.ev.n("probe_failure") != 0 || f.logs.count(slog.LevelWarn) != 0 || f.ev.n("reopen") != 0 {
			t.Fatal("failed force-try raised an alert")
		}
	})
}

func TestChooseForceTry(t *testing.T) {
	open := func(left time.Duration) State { return State{Open: true, Generation: 1, CooldownLeft: left} }
	healthDownOnly := State{}
	disabled := State{Disabled: true}
	tests := []struct {
		name       string
		candidates []State
		want       int
		ok         bool
	}{
		{"none", nil, -1, false},
		{"least cooldown left", []State{open(20 * time.Second), open(5 * time.Second), open(9 * time.Second)}, 1, true},
		{"health-down only counts as zero", []State{open(time.Second), healthDownOnly}, 1, true},
		{"ties in the given order", []State{open(3 * time.Second), open(time.Second), open(time.Second)}, 1, true},
		{"zero ties keep picker order", []State{healthDownOnly, open(0), healthDownOnly}, 0, true},
		{"disabled skipped even with zero left", []State{disabled, open(4 * time.Second)}, 1, true},
		{"disabled open skipped", []State{{Open: true, Disabled: true}, open(time.Minute)}, 1, true},
		{"all disabled", []State{disabled, disabled}, -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ChooseForceTry(tc.candidates)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("ChooseForceTry = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// Rule 6 at a closed generation: a backend that is only health-down has a
// closed breaker; all-down clients force-try it, and their failures must not
// trip it (the trial: three force-tries tripped such a backend).
func TestRule6_FailedForceTriesAtClosedGenerationDoNotTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Failures: 3}, nil)
		for range 10 {
			dial(f.b, KindForce, Failure)
		}
		if st := f.storeState(); st.Open || st.Generation != 0 || st.Cooldown != 0 {
			t.Fatalf("failed force-tries changed a closed breaker: %+v", st)
		}
		if f.ev.dial("force/failure") != 10 || f.ev.n("trip") != 0 {
			t.Fatalf("force failures counted %d, trips %d; want 10, 0", f.ev.dial("force/failure"), f.ev.n("trip"))
		}
		// Nor do they linger in the window for client failures to complete.
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure)
		if f.storeState().Open {
			t.Fatal("two client failures tripped: force-try failures were in the window")
		}
		dial(f.b, KindClient, Failure)
		if !f.storeState().Open {
			t.Fatal("three client failures did not trip")
		}
	})
}
