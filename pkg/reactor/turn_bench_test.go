package reactor

import (
	"fmt"
	"testing"
	"time"
)

// A loop's turn must cost the same beside 100 idle connections as beside
// 100,000: what an idle connection leaves on its loop is one timer in the
// heap (its idle timeout, or a parked UDP session's), which a turn only
// peeks at. Each iteration is one task's round trip through a running
// loop (a wake-up, a turn, the task), with n timers armed an hour ahead.
// Compare the rows: ns/op must not grow with n.
func BenchmarkTurnBesideIdleTimers(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			l, err := New(Config{})
			if err != nil {
				b.Fatal(err)
			}
			l.Start()
			defer func() { l.Stop(); l.Wait() }()
			timers := make([]Timer, n)
			l.Do(func() {
				at := l.Clock() + int64(time.Hour)
				for i := range timers {
					timers[i].OnFire(func(int64) {})
					l.Arm(&timers[i], at+int64(i))
				}
			})
			b.ReportAllocs()
			for b.Loop() {
				l.Do(func() {})
			}
		})
	}
}
