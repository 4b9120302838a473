package testnet

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// EventuallyOn is Eventually for code whose timers are on clk: before each
// poll that finds cond false it moves clk on by step. What cond waits for
// is made on sockets, in real time; and a goroutine that arms its next
// timer from a reading taken before a step fires a step late, so the clock
// moves on at every poll rather than once.
func EventuallyOn(t testing.TB, clk *clock.Fake, step time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, what, func() bool {
		if cond() {
			return true
		}
		clk.Advance(step)
		return cond()
	})
}
