package pool

import (
	"net"

	"github.com/l4lb/l4lb/pkg/dialer"
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
		firstByte = func() { up.settle(dialer.Success) }
	}
	return &Relaying{up: up, sess: p.relayer.Start(client, up.Conn, &b.Meter, firstByte)}
}

// Cut ends the relay at once with a reset on both sides.
func (r *Relaying) Cut() { r.sess.Cut() }

// Wait finishes the relay and settles a pending dial: a backend that reset
// before its first byte failed the dial, one that sent nothing and closed
// cleanly did not, and a relay cut from outside tells nothing.
func (r *Relaying) Wait() splice.Result {
	res := r.sess.Wait()
	r.up.Backend.active.Add(-1)
	if r.up.pending && res.ToClient == 0 {
		o := dialer.Success
		switch res.Outcome {
		case splice.BackendReset:
			o = dialer.Failure
		case splice.Aborted:
			o = dialer.Local // cut by a shutdown: no evidence either way
		}
		r.up.settle(o)
	}
	return res
}

// settle records a pending dial's outcome, in the dial counters and with
// the breaker at once, so the two never disagree.
func (up Upstream) settle(o dialer.Outcome) {
	up.Backend.countDial(up.kind, o)
	up.Backend.breaker.Done(up.attempt, breakerResult(o))
}
