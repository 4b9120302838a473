package breaker

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Rule 1: failures in a sliding window; successes do not clear it.
func TestRule1_InterleavedSuccessesDoNotHideFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		steps := []Result{Failure, Success, Failure, Success}
		for i, r := range steps {
			dial(f.b, KindClient, r)
			if !f.b.Allow() {
				t.Fatalf("tripped after step %d (%v); want still closed", i, r)
			}
		}
		dial(f.b, KindClient, Failure) // the 3rd failure
		if f.b.Allow() || !f.storeState().Open {
			t.Fatal("F S F S F did not trip at the 3rd failure")
		}
		if got := f.ev.n("trip"); got != 1 {
			t.Fatalf("trip events = %d, want 1", got)
		}
	})
}

func TestRule1_TripSetsGenerationAndCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 7 * time.Second}, nil)
		trip(t, f.b)
		st := f.storeState()
		want := State{Generation: 1, Open: true, Cooldown: 7 * time.Second, CooldownLeft: 7 * time.Second}
		if st != want {
			t.Fatalf("store state = %+v, want %+v", st, want)
		}
		if got := f.b.State(); got != want {
			t.Fatalf("breaker state = %+v, want %+v", got, want)
		}
		time.Sleep(3 * time.Second)
		if got := f.b.State().CooldownLeft; got != 4*time.Second {
			t.Fatalf("cooldown left after 3s = %v, want 4s", got)
		}
		// Further failures of the tripped generation are stale: no second trip.
		dial(f.b, KindClient, Failure)
		if f.ev.n("trip") != 1 || f.storeState().Generation != 1 {
			t.Fatalf("extra trip: trips=%d gen=%d", f.ev.n("trip"), f.storeState().Generation)
		}
	})
}

func TestRule1_FailuresOutsideWindowDoNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Window: 10 * time.Second}, nil)
		dial(f.b, KindClient, Failure) // t=0
		time.Sleep(6 * time.Second)
		dial(f.b, KindClient, Failure) // t=6
		time.Sleep(5 * time.Second)    // t=11: the first has left the window
		dial(f.b, KindClient, Failure)
		if !f.b.Allow() {
			t.Fatal("tripped on failures spread over more than the window")
		}
		time.Sleep(3 * time.Second) // t=14: 6, 11, 14 lie within 10s
		dial(f.b, KindClient, Failure)
		if f.b.Allow() {
			t.Fatal("did not trip on 3 failures within the window")
		}
	})
}

func TestRule1_LocalResultsCountNeitherWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		for range 10 {
			dial(f.b, KindClient, Local)
		}
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure)
		if !f.b.Allow() {
			t.Fatal("local results counted as failures")
		}
		if got := f.ev.dial("client/local"); got != 10 {
			t.Fatalf("local dials reported = %d, want 10", got)
		}
	})
}

func TestRule1_MinRatioOverMinVolume(t *testing.T) {
	cfg := Config{Failures: 3, MinRatio: 0.5, MinVolume: 10}
	tests := []struct {
		name     string
		dials    []Result
		wantTrip bool
	}{
		{"volume below min_volume", []Result{Failure, Failure, Failure, Failure}, false},
		{"ratio below min_ratio", append(repeat(Success, 7), repeat(Failure, 3)...), false},
		{"ratio reached on the 7th failure over 14 dials", append(repeat(Success, 7), repeat(Failure, 7)...), true},
		{"ratio one short", append(repeat(Success, 7), repeat(Failure, 6)...), false},
		{"all failures once volume is reached", repeat(Failure, 10), true},
		{"a success never trips", append(repeat(Failure, 9), Success), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, cfg, nil)
				for _, r := range tc.dials {
					dial(f.b, KindClient, r)
				}
				if tripped := !f.b.Allow(); tripped != tc.wantTrip {
					t.Fatalf("tripped = %v, want %v", tripped, tc.wantTrip)
				}
			})
		})
	}
}

func repeat(r Result, n int) []Result {
	out := make([]Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func TestRule1_CloseClearsTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure) // trip: gen 1
		dial(f.b, KindForce, Success)  // close: gen 2
		if !f.b.Allow() {
			t.Fatal("force-try success did not close")
		}
		dial(f.b, KindClient, Failure)
		dial(f.b, KindClient, Failure)
		if !f.b.Allow() {
			t.Fatal("failures from before the close still counted")
		}
		dial(f.b, KindClient, Failure)
		if f.b.Allow() {
			t.Fatal("3 failures after the close did not trip")
		}
	})
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero: no defaults here", Config{}, false},
		{"complete", Config{}.withDefaults(), true},
		{"negative failures", Config{Failures: -1}.withDefaults(), false},
		{"ratio above one", Config{MinRatio: 1.5}.withDefaults(), false},
		{"max below cooldown", Config{Cooldown: time.Minute, MaxCooldown: time.Second}.withDefaults(), false},
		{"cooldown above default max", Config{Cooldown: 10 * time.Minute}.withDefaults(), true},
		{"negative successes", Config{Successes: -2}.withDefaults(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(testKey, tc.cfg, NewMemoryStore(nil), Options{})
			if tc.cfg == (Config{}) {
				// Every field without a zero meaning is named.
				for _, want := range []string{"failures 0", "window 0s", "cooldown 0s", "successes 0"} {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("New(Config{}) error %v does not name %q", err, want)
					}
				}
			}
			if (err == nil) != tc.ok {
				t.Fatalf("New error = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}
