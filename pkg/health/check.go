package health

import (
	"context"
	"errors"
	"net"
	"os"
	"time"
)

// Result is the outcome of one check.
type Result uint8

const (
	// Pass: the backend answered as the check expects (accepted the
	// connection; sent the expected reply; did not refuse).
	Pass Result = iota
	// Fail: refused, reset, unreachable, a wrong or missing reply, or timed
	// out.
	Fail
	// Inconclusive: local trouble (EMFILE, EADDRNOTAVAIL, ENOBUFS, ...) or
	// a check called off by its caller; says nothing about the backend and
	// counts neither way.
	Inconclusive
)

// String returns "pass", "fail" or "inconclusive".
func (r Result) String() string {
	switch r {
	case Pass:
		return "pass"
	case Fail:
		return "fail"
	case Inconclusive:
		return "inconclusive"
	}
	return "unknown"
}

// Check makes one health check. It must honour ctx, which carries the
// check timeout.
type Check func(ctx context.Context) Result

// DialFunc dials like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// TCPCheck returns a Check that TCP-connects to addr with dial and closes the
// connection at once. isLocal classifies dial errors that are local trouble
// (they yield Inconclusive); nil counts every error as Fail. dial nil uses a
// plain net.Dialer.
func TCPCheck(dial DialFunc, addr string, isLocal func(error) bool) Check {
	dial = orPlainDial(dial)
	return func(ctx context.Context) Result {
		conn, err := dial(ctx, "tcp", addr)
		if err != nil {
			return dialResult(err, isLocal)
		}
		_ = conn.Close() // the connect was the whole check
		return Pass
	}
}

func orPlainDial(dial DialFunc) DialFunc {
	if dial == nil {
		return (&net.Dialer{}).DialContext
	}
	return dial
}

// dialResult judges a failed dial: local trouble is Inconclusive, anything
// else the backend's fault.
func dialResult(err error, isLocal func(error) bool) Result {
	if isLocal != nil && isLocal(err) {
		return Inconclusive
	}
	return Fail
}

// ioResult judges an error reading or writing a check's socket once it is
// open: a check called off by its caller (ctx canceled, as at shutdown)
// says nothing, a timeout is the backend's (it did not answer in time),
// local trouble says nothing, and anything else (a reset, an ICMP error)
// is the backend's fault.
func ioResult(ctx context.Context, err error, isLocal func(error) bool) Result {
	if errors.Is(ctx.Err(), context.Canceled) {
		return Inconclusive
	}
	if isTimeout(err) {
		return Fail
	}
	return dialResult(err, isLocal)
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
}

// bindContext makes conn's reads and writes honour ctx: they stop at its
// deadline, and at once when it is canceled. Call the returned stop before
// closing conn; no goroutine outlives ctx or stop.
func bindContext(ctx context.Context, conn net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() {
		_ = conn.SetDeadline(time.Unix(1, 0)) // in the past: blocked calls return now
	})
}
