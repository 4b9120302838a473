package pool

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
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
	up    Upstream
	sess  splice.Session
	early *time.Timer // count_early_reset: settles a silent backend's dial
}

// StartRelay starts relaying client to the upstream (see splice.Start for
// why Wait is best called on a fresh goroutine). The upstream already
// counts in the backend's active connections (from its dial).
func (p *Pool) StartRelay(client net.Conn, up Upstream) *Relaying {
	r := &Relaying{up: up}
	var firstByte func()
	if pend := up.pending; pend != nil {
		// count_early_reset: the dial is judged by what the backend does
		// first; a first byte proves it, and so does a silence longer than
		// early_reset_window (a reset after that is no failed connect).
		firstByte = func() { pend.settle(dialer.Success) }
		r.early = time.AfterFunc(p.cfg.Breaker.EarlyResetWindow, firstByte)
	}
	r.sess = p.relayer.Start(client, up.Conn, &up.Backend.Meter, firstByte)
	return r
}

// Cut ends the relay at once with a reset on both sides.
func (r *Relaying) Cut() { r.sess.Cut() }

// Wait finishes the relay and settles a pending dial: a backend that reset
// before its first byte (within the window) failed the dial, one that sent
// nothing and closed cleanly did not, and a relay cut from outside tells
// nothing.
func (r *Relaying) Wait() splice.Result {
	res := r.sess.Wait()
	if r.early != nil {
		r.early.Stop()
	}
	r.up.Backend.active.Add(-1)
	if r.up.pending != nil && res.ToClient == 0 {
		o := dialer.Success
		switch res.Outcome {
		case splice.BackendReset:
			o = dialer.Failure
		case splice.Aborted:
			o = dialer.Local // cut by a shutdown: no evidence either way
		}
		r.up.pending.settle(o)
	}
	return res
}

// pending is a dial whose result waits for the backend's first move
// (count_early_reset). It settles once, whichever comes first.
type pending struct {
	b       *Backend
	kind    DialKind
	attempt breaker.Attempt
	done    atomic.Bool
}

// settle records the dial's outcome, in the dial counters and with the
// breaker at once, so the two never disagree. Later calls do nothing; a nil
// pending has nothing to settle.
func (p *pending) settle(o dialer.Outcome) {
	if p == nil || !p.done.CompareAndSwap(false, true) {
		return
	}
	p.b.countDial(p.kind, o)
	p.b.breaker.Done(p.attempt, breakerResult(o))
}
