package pool

import (
	"log/slog"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// breakerEvents counts b's breaker transitions and logs them as backend
// state changes. Tripping logs at info (no alert); the alert of rule 4 is
// logged by the breaker itself at warn.
func (p *Pool) breakerEvents(b *Backend, log *slog.Logger) breaker.Events {
	changed := func(msg string) func(string) {
		return func(string) {
			st := b.breaker.State()
			log.Info(msg, "generation", st.Generation, "cooldown", st.Cooldown, "usable", b.refreshUsable(p.now))
		}
	}
	trip := changed("breaker opened")
	return breaker.Events{
		Trip: func(key string) {
			b.trips.Add(1)
			trip(key)
		},
		Close:  changed("breaker closed"),
		Reopen: changed("breaker re-opened after a failed probe"),
		ProbeFailure: func(string) {
			b.probeFailures.Add(1)
		},
		Stale: func(string) {
			b.stale.Add(1)
		},
	}
}
