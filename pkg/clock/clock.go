// Package clock is the time source every rule and timer of l4lb reads:
// the breaker's windows and cooldowns, the health checker's intervals, the
// pool's slow start and drains, the event loops' deadlines (pkg/reactor
// takes one; the server leaves it nil, the real clock). Production
// passes Real; tests run under testing/synctest (where Real follows the
// bubble's clock) or, where goroutines wait on real sockets, pass a Fake,
// so rule and timer logic is checked without sleeping.
package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	// Now is the current time; its monotonic reading orders events.
	Now() time.Time
	// AfterFunc calls f on a goroutine of its own once d has passed,
	// unless the timer is stopped first (time.AfterFunc).
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer whose channel receives the time once d has
	// passed (time.NewTimer).
	NewTimer(d time.Duration) (Timer, <-chan time.Time)
}

// Timer is a timer made by a Clock.
type Timer interface {
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
	// Reset makes the timer fire once d has passed from now; false if it
	// had already fired or been stopped.
	Reset(d time.Duration) bool
}

// Real is the system clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// NewTimer is time.NewTimer.
func (Real) NewTimer(d time.Duration) (Timer, <-chan time.Time) {
	t := time.NewTimer(d)
	return t, t.C
}

// Or returns c, or Real when c is nil: for the Clock field of a config
// whose zero value must work.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
