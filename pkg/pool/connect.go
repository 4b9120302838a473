package pool

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/dialer"
)

var (
	// ErrNoBackend: every allowed attempt failed, or no backend can be tried.
	ErrNoBackend = errors.New("no backend could be dialed")
	// ErrLocal: local trouble (out of fds, ports, buffers; client gone)
	// stopped the attempt; no backend is blamed.
	ErrLocal = errors.New("local trouble, no backend blamed")
)

// maxCandidates bounds retries (the config caps them at 16) so the
// candidate list fits on the stack.
const maxCandidates = 17

// ErrBudget: the pool's connect_budget ran out before a backend answered.
var ErrBudget = errors.New("connect budget spent")

// Connect dials a backend for a client at src. It tries the picker's
// candidates in order, up to 1+retries distinct backends, all within the
// pool's connect_budget, recording every attempt with the breaker, and
// returns the first connection made. When no backend is usable it
// force-tries exactly one (breaker rule 6).
// clientGone, if not nil, is asked after a failed dial whether the client
// has left meanwhile: such a dial blames nobody and ends the attempt.
func (p *Pool) Connect(ctx context.Context, src netip.AddrPort, clientGone func() bool) (Upstream, error) {
	deadline := time.Now().Add(p.cfg.ConnectBudget)
	var buf [maxCandidates]int
	n := min(1+p.cfg.Retries, maxCandidates)
	cands := p.picker.Pick(src, n, buf[:0])
	if len(cands) == 0 {
		return p.forceTry(ctx, src, deadline, clientGone)
	}
	var last error
	for k, i := range cands {
		b := p.backends[i]
		// After a failed dial (up to connect_timeout long) a later
		// candidate may have tripped meanwhile: open means no client dial.
		if k > 0 && !b.Usable() {
			continue
		}
		if k > 0 && !time.Now().Before(deadline) {
			last = ErrBudget
			break
		}
		up, err := p.dial(ctx, b, DialClient, deadline, clientGone)
		if err == nil {
			return up, nil
		}
		if errors.Is(err, ErrLocal) {
			return Upstream{}, err
		}
		last = err
	}
	return Upstream{}, errors.Join(ErrNoBackend, last)
}

// forceTry dials the one non-disabled backend with the least cooldown left,
// ties in the picker's order for this client (so hash affinity holds).
func (p *Pool) forceTry(ctx context.Context, src netip.AddrPort, deadline time.Time, clientGone func() bool) (Upstream, error) {
	var order [64]int
	idx := p.picker.Order(src, order[:0])
	states := make([]breaker.State, len(idx))
	for k, i := range idx {
		states[k] = p.backends[i].breaker.State()
	}
	k, ok := breaker.ChooseForceTry(states)
	if !ok {
		return Upstream{}, ErrNoBackend
	}
	up, err := p.dial(ctx, p.backends[idx[k]], DialForce, deadline, clientGone)
	if err != nil && !errors.Is(err, ErrLocal) {
		err = errors.Join(ErrNoBackend, err)
	}
	return up, err
}

// dial makes one attempt of kind k on b, ending by deadline at the latest,
// and reports it to the breaker. The generation is captured before the
// connect syscall (Begin). The backend counts the connection from here: a
// dial in flight is load (see Backend.active); a failed one gives it back.
func (p *Pool) dial(ctx context.Context, b *Backend, k DialKind, deadline time.Time, clientGone func() bool) (Upstream, error) {
	bk := breaker.KindClient
	if k == DialForce {
		bk = breaker.KindForce
	}
	b.active.Add(1)
	a := b.breaker.Begin(bk)
	// A dial the budget cuts shorter than connect_timeout proves nothing
	// when it times out: the backend did not get its full time.
	cut := time.Until(deadline) < p.cfg.ConnectTimeout
	c, err := p.dialer.DialBy(ctx, b.Addr, deadline)
	o := dialer.Classify(err)
	switch {
	case o == dialer.Failure && cut && dialer.IsTimeout(err):
		o = dialer.Local
		err = errors.Join(ErrBudget, err)
	case o == dialer.Failure && clientGone != nil && clientGone():
		// A client that left while its dial was in flight never counts
		// against the backend (DESIGN, data path rule 5).
		o = dialer.Local
	}
	var pend *pending
	if o == dialer.Success && p.cfg.Breaker.CountEarlyReset {
		// With count_early_reset a connect is only half the evidence: the
		// relay settles the dial once the backend sends a byte, resets
		// first, or stays silent for early_reset_window.
		pend = &pending{b: b, kind: k, attempt: a}
	} else {
		b.countDial(k, o)
		b.breaker.Done(a, breakerResult(o))
	}
	if err != nil {
		b.active.Add(-1)
		if errors.Is(err, ErrBudget) {
			return Upstream{}, err
		}
		if o == dialer.Local {
			return Upstream{}, errors.Join(ErrLocal, err)
		}
		p.log.Debug("dial failed", "backend", b.Addr, "kind", k.String(), "error", err)
		return Upstream{}, err
	}
	return Upstream{Conn: c, Backend: b, pending: pend}, nil
}

// probeFunc is the breaker's own recovery dial for b.
func (p *Pool) probeFunc(b *Backend) func(ctx context.Context) breaker.Result {
	return func(ctx context.Context) breaker.Result {
		c, err := p.dialer.Dial(ctx, b.Addr)
		o := dialer.Classify(err)
		b.countDial(DialProbe, o)
		if c != nil {
			c.Close()
		}
		return breakerResult(o)
	}
}

// countingDial is the health checks' dial: the pool's dialer, counted as
// kind health. Health results never reach the breaker.
func (p *Pool) countingDial(b *Backend, k DialKind) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := p.dialer.DialContext(ctx, network, addr)
		b.countDial(k, dialer.Classify(err))
		return c, err
	}
}

// Upstream is a connection made to a backend for one client. It counts in
// the backend's active connections until the relay started on it ends, or
// until Release.
type Upstream struct {
	Conn    *net.TCPConn
	Backend *Backend
	// pending: the breaker has not heard this dial's result yet
	// (count_early_reset); the relay settles it.
	pending *pending
}

// Release gives up an upstream that will not be relayed: closes the
// connection and gives back its count. A pending dial settles as a success
// (the connect worked; nothing else was seen).
func (up Upstream) Release() {
	up.Conn.Close()
	up.pending.settle(dialer.Success)
	up.Backend.active.Add(-1)
}
