package pool

import (
	"github.com/l4lb/l4lb/pkg/breaker"
)

// breakerEvents counts b's breaker transitions and recomputes its
// usability from the state each event carries (the hooks must not call
// back into the breaker). The breaker logs the transitions itself, with the
// pool's and backend's attributes, so nothing is logged twice.
func (p *Pool) breakerEvents(b *Backend) breaker.Events {
	changed := func(_ string, st breaker.State) { b.setUsable(b.usableFrom(st), p.now) }
	return breaker.Events{
		Trip: func(key string, st breaker.State) {
			b.trips.Add(1)
			changed(key, st)
		},
		Close:   changed,
		Reopen:  changed,
		Changed: changed, // a change made elsewhere: the picker's masks follow
		ProbeFailure: func(string) {
			b.probeFailures.Add(1)
		},
		Stale: func(string) {
			b.stale.Add(1)
		},
		Dropped: func(string) {
			b.dropped.Add(1)
		},
	}
}
