package pool

import (
	"github.com/l4lb/l4lb/pkg/breaker"
)

// breakerEvents counts b's breaker transitions and recomputes its
// usability from the state each event carries (the hooks must not call
// back into the breaker). The breaker logs the transitions itself, with the
// pool's and backend's attributes, so nothing is logged twice.
func (p *Pool) breakerEvents(b *Backend) breaker.Events {
	changed := func(_ string, st breaker.State) {
		if !st.Open {
			b.probeFailed.Store(false) // closed, here or elsewhere in a fleet
		}
		b.setUsable(b.usableFrom(st), p.clock.Now)
	}
	return breaker.Events{
		Trip: func(key string, st breaker.State) {
			b.trips.Add(1)
			b.probeFailed.Store(false) // a new outage: no probe of it yet
			changed(key, st)
		},
		Close: func(key string, st breaker.State) {
			changed(key, st)
			p.recoveredFromAllDown(b)
		},
		Reopen: changed,
		// A change made elsewhere: the picker's masks follow. Two
		// refreshes may report out of order, so the state read is the
		// snapshot's now, not the one reported (nil while the breaker is
		// being built: its first read is the only one then).
		Changed: func(key string, st breaker.State) {
			if b.breaker != nil {
				st = b.breaker.State()
			}
			changed(key, st)
		},
		ProbeFailure: func(string) {
			b.probeFailures.Add(1)
			b.probeFailed.Store(true)
		},
		Stale: func(string) {
			b.stale.Add(1)
		},
		Dropped: func(string) {
			b.dropped.Add(1)
		},
	}
}

// recoveredFromAllDown asks for the recovery probe of every other backend
// of b's set (primaries, or backups) whose breaker is open when b's
// closing ends an outage of that whole set (no other backend of it in
// rotation): one backend coming back from a set-wide outage says the
// cause may be gone for the rest too (a restart of every backend, a
// network path that came back), and left to their cooldowns they would
// leave the whole load on b for tens of seconds. With backups serving,
// the first primary back would otherwise take every new client from the
// backups alone. The probes are the ordinary ones (docs/breaker.md,
// readmission): single flight, each at its breaker's open generation, so
// the stale-evidence rule is untouched.
func (p *Pool) recoveredFromAllDown(b *Backend) {
	for _, o := range p.backends {
		if o != b && o.backup == b.backup && o.Weight() > 0 && o.InRotation() {
			return // the set was not all down
		}
	}
	for _, o := range p.backends {
		if st := o.breaker.State(); o != b && o.backup == b.backup && st.Open && !st.Disabled {
			o.breaker.ProbeNow()
		}
	}
}
