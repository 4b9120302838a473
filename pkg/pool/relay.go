package pool

import (
	"net"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/splice"
)

// Relay relays client to the upstream until both are done, keeping the
// backend's active count and byte meters, and closes both connections.
func (p *Pool) Relay(client net.Conn, up Upstream) splice.Result {
	b := up.Backend
	b.active.Add(1)
	defer b.active.Add(-1)
	if !up.pending {
		return p.relayer.Relay(client, up.Conn, &b.Meter)
	}
	// count_early_reset: the dial is judged by what the backend does first.
	res := p.relayer.RelayNotify(client, up.Conn, &b.Meter, func() {
		b.breaker.Done(up.attempt, breaker.Success)
	})
	if res.ToClient == 0 {
		r := breaker.Success
		if res.Outcome == splice.BackendReset {
			r = breaker.Failure
		}
		b.breaker.Done(up.attempt, r)
	}
	return res
}
