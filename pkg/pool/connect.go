package pool

import (
	"context"
	"errors"
	"net"
	"net/netip"

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

// Connect dials a backend for a client at src. It tries the picker's
// candidates in order, up to 1+retries distinct backends, recording every
// attempt with the breaker, and returns the first connection made. When no
// backend is usable it force-tries exactly one (breaker rule 6).
// clientGone, if not nil, is asked after a failed dial whether the client
// has left meanwhile: such a dial blames nobody and ends the attempt.
func (p *Pool) Connect(ctx context.Context, src netip.AddrPort, clientGone func() bool) (Upstream, error) {
	var buf [maxCandidates]int
	n := min(1+p.cfg.Retries, maxCandidates)
	cands := p.picker.Pick(src, n, buf[:0])
	if len(cands) == 0 {
		return p.forceTry(ctx, src, clientGone)
	}
	var last error
	for k, i := range cands {
		b := p.backends[i]
		// After a failed dial (up to connect_timeout long) a later
		// candidate may have tripped meanwhile: open means no client dial.
		if k > 0 && !b.Usable() {
			continue
		}
		up, err := p.dial(ctx, b, DialClient, clientGone)
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
func (p *Pool) forceTry(ctx context.Context, src netip.AddrPort, clientGone func() bool) (Upstream, error) {
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
	up, err := p.dial(ctx, p.backends[idx[k]], DialForce, clientGone)
	if err != nil && !errors.Is(err, ErrLocal) {
		err = errors.Join(ErrNoBackend, err)
	}
	return up, err
}

// dial makes one attempt of kind k on b and reports it to the breaker. The
// generation is captured before the connect syscall (Begin).
func (p *Pool) dial(ctx context.Context, b *Backend, k DialKind, clientGone func() bool) (Upstream, error) {
	bk := breaker.KindClient
	if k == DialForce {
		bk = breaker.KindForce
	}
	a := b.breaker.Begin(bk)
	c, err := p.dialer.Dial(ctx, b.Addr)
	o := dialer.Classify(err)
	if o == dialer.Failure && clientGone != nil && clientGone() {
		// A client that left while its dial was in flight never counts
		// against the backend (DESIGN, data path rule 5).
		o = dialer.Local
	}
	// With count_early_reset a connect is only half the evidence: the relay
	// settles the dial once the backend sends a byte or resets first.
	pending := o == dialer.Success && p.cfg.Breaker.CountEarlyReset
	if !pending {
		b.countDial(k, o)
		b.breaker.Done(a, breakerResult(o))
	}
	if o == dialer.Local {
		return Upstream{}, errors.Join(ErrLocal, err)
	}
	if err != nil {
		p.log.Debug("dial failed", "backend", b.Addr, "kind", k.String(), "err", err)
		return Upstream{}, err
	}
	return Upstream{Conn: c, Backend: b, kind: k, attempt: a, pending: pending}, nil
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

// Upstream is a connection made to a backend for one client.
type Upstream struct {
	Conn    *net.TCPConn
	Backend *Backend
	kind    DialKind
	attempt breaker.Attempt
	// pending: the breaker has not heard this dial's result yet
	// (count_early_reset); Relay reports it.
	pending bool
}
