package dialer

import (
	"context"
	"fmt"
	"net"
	"time"
)

// DialError is a failed dial to one backend, in the style of net.OpError.
type DialError struct {
	Backend string
	Err     error
}

func (e *DialError) Error() string { return fmt.Sprintf("dial backend %s: %v", e.Backend, e.Err) }
func (e *DialError) Unwrap() error { return e.Err }

// Dialer connects to backends over TCP with a connect timeout.
type Dialer struct {
	nd net.Dialer
}

// New returns a Dialer whose connects give up after timeout.
func New(timeout time.Duration) *Dialer {
	return &Dialer{nd: net.Dialer{
		Timeout: timeout,
		// No keepalive probes: they cost setsockopt calls per connection,
		// and a dead backend is found by the idle timeout.
		KeepAlive: -1,
	}}
}

// Dial connects to addr (an IP literal host:port). Errors are *DialError.
// ctx ends the dial early; its cancellation makes the error local trouble.
func (d *Dialer) Dial(ctx context.Context, addr string) (*net.TCPConn, error) {
	c, err := d.nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &DialError{Backend: addr, Err: err}
	}
	return c.(*net.TCPConn), nil
}

// DialContext has the shape of net.Dialer.DialContext, for health checks.
func (d *Dialer) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	c, err := d.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}
