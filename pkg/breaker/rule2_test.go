package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// Rule 2: open refuses client dials; stale results neither close nor extend.
func TestRule2_StaleResultsNeitherCloseNorExtend(t *testing.T) {
	for _, r := range []Result{Success, Failure} {
		for _, k := range []Kind{KindClient, KindProbe, KindForce} {
			t.Run(k.String()+"/"+r.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := newFixture(t, Config{Cooldown: 10 * time.Second}, nil)
					old := Attempt{Kind: k, Generation: 0} // captured before the trip
					trip(t, f.b)
					time.Sleep(4 * time.Second)
					f.b.Done(old, r)
					want := State{Generation: 1, Open: true, Cooldown: 10 * time.Second, CooldownLeft: 6 * time.Second}
					if st := f.storeState(); st != want {
						t.Fatalf("store = %+v, want %+v", st, want)
					}
					if f.ev.n("stale") != 1 || f.ev.n("probe_failure") != 0 {
						t.Fatalf("stale=%d probe_failure=%d", f.ev.n("stale"), f.ev.n("probe_failure"))
					}
				})
			})
		}
	}
}

func TestRule2_OpenRefusesClientDials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		if !f.b.Allow() {
			t.Fatal("fresh breaker refuses")
		}
		trip(t, f.b)
		if f.b.Allow() {
			t.Fatal("open breaker allows client dials")
		}
		// A client dial that raced the trip (captured the open generation)
		// is no post-trip evidence.
		dial(f.b, KindClient, Success)
		if !f.storeState().Open || f.ev.n("close") != 0 {
			t.Fatal("client success of the open generation closed the breaker")
		}
	})
}
