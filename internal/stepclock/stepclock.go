// Package stepclock is a clock for the event loops' tests, moved by hand:
// its Now stands still until the test adds to it, so timer and time-spent
// logic is checked without sleeping. Its timers are the real clock's
// (clock.Real): the loops read only Now.
package stepclock

import (
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// Clock is a clock.Clock whose Now moves only by Add.
type Clock struct {
	clock.Real
	start time.Time
	off   atomic.Int64
}

// New returns a clock standing at the real time now.
func New() *Clock { return &Clock{start: time.Now()} }

// Now is the start plus everything added.
func (c *Clock) Now() time.Time { return c.start.Add(time.Duration(c.off.Load())) }

// Add moves the clock on by d. Safe from any goroutine.
func (c *Clock) Add(d time.Duration) { c.off.Add(int64(d)) }

// Elapsed is everything added so far: the time on the clock of a loop
// made while the clock stood at its start.
func (c *Clock) Elapsed() time.Duration { return time.Duration(c.off.Load()) }
