package health

import (
	"context"
	"net"
)

// Result is the outcome of one check.
type Result uint8

const (
	// Pass: the backend accepted the connection.
	Pass Result = iota
	// Fail: refused, reset, unreachable or timed out.
	Fail
	// Inconclusive: local trouble (EMFILE, EADDRNOTAVAIL, ENOBUFS, ...);
	// says nothing about the backend and counts neither way.
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
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context) Result {
		conn, err := dial(ctx, "tcp", addr)
		if err != nil {
			if isLocal != nil && isLocal(err) {
				return Inconclusive
			}
			return Fail
		}
		_ = conn.Close() // the connect was the whole check
		return Pass
	}
}
