package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// Transition hooks get the state after the transition, so a hook never needs
// to call back into the Breaker (the documented contract).
func TestEventsCarryTheNewState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []State
		f := newFixture(t, Config{Cooldown: 10 * time.Second}, func(o *Options) {
			keep := func(_ string, st State) { got = append(got, st) }
			o.Events.Trip, o.Events.Reopen, o.Events.Close = keep, keep, keep
		})
		trip(t, f.b)
		f.b.Done(Attempt{Kind: KindProbe, Generation: 1}, Failure)
		f.b.Done(Attempt{Kind: KindForce, Generation: 2}, Success)
		want := []State{
			{Generation: 1, Open: true, Cooldown: 10 * time.Second, CooldownLeft: 10 * time.Second},
			{Generation: 2, Open: true, Cooldown: 20 * time.Second, CooldownLeft: 20 * time.Second},
			{Generation: 3},
		}
		if len(got) != len(want) {
			t.Fatalf("events %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("event %d state %+v, want %+v", i, got[i], want[i])
			}
		}
	})
}
