package dialer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
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
	// v4, v6: the local addresses to dial from, by the backend's family
	// (WithSources); nil: the kernel's choice.
	v4, v6 *net.Dialer
}

// WithSources makes d dial from the first of srcs of the backend's family
// (the pool's first source), the port left to the kernel at connect time
// by the full 4-tuple (IP_BIND_ADDRESS_NO_PORT), as the event loops dial:
// a backend that only admits the pool's sources admits its health checks
// and probes too.
func (d *Dialer) WithSources(srcs []netip.Addr) *Dialer {
	for _, a := range srcs {
		nd := d.nd
		nd.LocalAddr = &net.TCPAddr{IP: a.AsSlice()}
		nd.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_IP, ipBindAddressNoPort, 1)
			}); err != nil {
				return err
			}
			return serr
		}
		switch {
		case a.Is4() && d.v4 == nil:
			d.v4 = &nd
		case a.Is6() && d.v6 == nil:
			d.v6 = &nd
		}
	}
	return d
}

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT (linux/in.h).
const ipBindAddressNoPort = 24

// dialerFor is the net.Dialer for addr's family.
func (d *Dialer) dialerFor(addr string) *net.Dialer {
	if d.v4 == nil && d.v6 == nil {
		return &d.nd
	}
	ap, err := netip.ParseAddrPort(addr)
	switch {
	case err != nil:
	case ap.Addr().Unmap().Is4() && d.v4 != nil:
		return d.v4
	case ap.Addr().Is6() && !ap.Addr().Is4In6() && d.v6 != nil:
		return d.v6
	}
	return &d.nd
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
	c, err := d.dialerFor(addr).DialContext(ctx, "tcp", addr)
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
