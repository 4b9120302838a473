package pool

import (
	"context"
	"net"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/dialer"
)

// The pool's own dials, made on goroutines of the breaker and the health
// prober rather than on the event loops: the breaker's recovery probe and
// the active health checks.

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
// kind k. Health results never reach the breaker.
func (p *Pool) countingDial(b *Backend, k DialKind) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := p.dialer.DialContext(ctx, network, addr)
		b.countDial(k, dialer.Classify(err))
		return c, err
	}
}
