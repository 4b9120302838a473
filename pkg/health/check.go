package health

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
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

// Outcome is what one check found: its Result, and the error that decided
// a Fail or an Inconclusive (why the backend failed the check, or what
// kept the check from judging it). Err is nil on Pass, and ignored there.
type Outcome struct {
	Result Result
	Err    error
}

// Check makes one health check. It must honour ctx, which carries the
// check timeout.
type Check func(ctx context.Context) Outcome

// DialFunc dials like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// TCPCheck returns a Check that TCP-connects to addr with dial and closes the
// connection at once. isLocal classifies dial errors that are local trouble
// (they yield Inconclusive); nil counts every error as Fail. dial nil uses a
// plain net.Dialer.
func TCPCheck(dial DialFunc, addr string, isLocal func(error) bool) Check {
	dial = orPlainDial(dial)
	return func(ctx context.Context) Outcome {
		conn, err := dial(ctx, "tcp", addr)
		if err != nil {
			return dialOutcome(err, isLocal)
		}
		_ = conn.Close() // the connect was the whole check
		return Outcome{Result: Pass}
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

// dialOutcome is dialResult with its cause: the dial's own error, which
// names the network, the address and the errno ("dial tcp 10.0.0.7:80:
// connect: connection refused").
func dialOutcome(err error, isLocal func(error) bool) Outcome {
	return Outcome{Result: dialResult(err, isLocal), Err: err}
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

// ioOutcome is ioResult with its cause: err after doing, what the check
// was at ("sending the request"), and why it ended there: called off, or
// out of time.
func ioOutcome(ctx context.Context, doing string, err error, isLocal func(error) bool) Outcome {
	r := ioResult(ctx, err, isLocal)
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		err = fmt.Errorf("%s: called off (%w): %w", doing, ctx.Err(), err)
	case isTimeout(err):
		err = fmt.Errorf("%s: timed out: %w", doing, err)
	default:
		err = fmt.Errorf("%s: %w", doing, err)
	}
	return Outcome{Result: r, Err: err}
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

// shownBytes is how many bytes of a reply or an expectation an error
// shows; the rest is summed up by its length.
const shownBytes = 64

// showBytes renders b for an error message and a log line: a quoted
// string when b is printable ASCII (with \r, \n and \t escaped), else hex
// ("0x" and two digits a byte); hexOnly forces hex, so that two byte
// strings compared side by side are shown alike. At most shownBytes bytes
// are shown, followed by "..." and b's length when there are more.
func showBytes(b []byte, hexOnly bool) string {
	cut := b[:min(len(b), shownBytes)]
	var s string
	if hexOnly || !printable(b) {
		s = "0x" + hex.EncodeToString(cut)
	} else {
		s = strconv.Quote(string(cut))
	}
	if len(cut) < len(b) {
		s += fmt.Sprintf("... (%d bytes)", len(b))
	}
	return s
}

// showPair renders a reply and what was expected alike: both quoted, or
// both in hex when either is not printable.
func showPair(got, expect []byte) (string, string) {
	hexOnly := !printable(got) || !printable(expect)
	return showBytes(got, hexOnly), showBytes(expect, hexOnly)
}

// printable reports whether b is printable ASCII, tabs and line ends
// included: safe to show as a quoted string.
func printable(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\r' && c != '\n' && c != '\t' {
			return false
		}
	}
	return true
}
