package pool

import (
	"net"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/splice"
)

// Relay relays client to the upstream until both are done, keeping the
// backend's active count and byte meters, and closes both connections.
func (p *Pool) Relay(client net.Conn, up Upstream) splice.Result {
	return p.StartRelay(client, up).Wait()
}

// Relaying is a relay started by StartRelay; call Wait to finish it.
type Relaying struct {
	up   Upstream
	sess splice.Session
}

// StartRelay starts relaying client to the upstream (see splice.Start for
// why Wait is best called on a fresh goroutine).
func (p *Pool) StartRelay(client net.Conn, up Upstream) *Relaying {
	b := up.Backend
	b.active.Add(1)
	var firstByte func()
	if up.pending {
		// count_early_reset: the dial is judged by what the backend does
		// first; a first byte proves it.
		firstByte = func() { b.breaker.Done(up.attempt, breaker.Success) }
	}
	return &Relaying{up: up, sess: p.relayer.Start(client, up.Conn, &b.Meter, firstByte)}
}

// Wait finishes the relay and settles a pending dial: a backend that reset
// before its first byte failed the dial, one that sent nothing and closed
// cleanly did not.
func (r *Relaying) Wait() splice.Result {
	res := r.sess.Wait()
	b := r.up.Backend
	b.active.Add(-1)
	if r.up.pending && res.ToClient == 0 {
		result := breaker.Success
		if res.Outcome == splice.BackendReset {
			result = breaker.Failure
		}
		b.breaker.Done(r.up.attempt, result)
	}
	return res
}
