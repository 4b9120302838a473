package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

// Real's timers follow the runtime's clock; under synctest that clock is
// the bubble's, so this checks the wiring without waiting.
func TestRealTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Or(nil)
		start := c.Now()
		fired := make(chan time.Time, 1)
		c.AfterFunc(3*time.Second, func() { fired <- c.Now() })
		tm, ch := c.NewTimer(time.Second)
		<-ch
		if got := c.Now().Sub(start); got != time.Second {
			t.Fatalf("NewTimer fired after %v, want 1s", got)
		}
		if tm.Reset(time.Hour) {
			t.Fatal("Reset of a fired timer reported it active")
		}
		if !tm.Stop() {
			t.Fatal("Stop of a reset timer reported it inactive")
		}
		if got := (<-fired).Sub(start); got != 3*time.Second {
			t.Fatalf("AfterFunc fired after %v, want 3s", got)
		}
	})
}
