package rawsys

import (
	"math"
	"testing"
	"time"
)

// epoll_wait takes its timeout as a C int: a timer further away than
// 2^31-1 ms (24.8 days) must not reach it as a negative number, which
// means "wait forever" and would never fire the timer. The timeout is
// capped, as the Go runtime's netpoller caps its own; the loop wakes at the
// cap, finds nothing due, and waits again.
func TestWaitTimeoutOfAFarTimerStaysPositive(t *testing.T) {
	const day = 24 * int64(time.Hour)
	for _, tc := range []struct {
		wait int64
		want int // 0: anything in 1..MaxWaitMs
	}{
		{wait: -5, want: 0},
		{wait: 0, want: 0},
		{wait: 1, want: 1},
		{wait: int64(time.Millisecond), want: 1},
		{wait: int64(time.Millisecond) + 1, want: 2},
		{wait: 10 * day, want: int(10 * day / int64(time.Millisecond))},
		{wait: 25 * day},
		{wait: 1000 * day},
		{wait: math.MaxInt64},
	} {
		got := WaitTimeout(tc.wait)
		// What the kernel reads: the low 32 bits, signed.
		kernel := int32(uint32(got))
		if tc.want != 0 || tc.wait <= 0 {
			if got != tc.want {
				t.Errorf("WaitTimeout(%v) = %d, want %d", time.Duration(tc.wait), got, tc.want)
			}
			continue
		}
		if kernel <= 0 || int64(kernel) != int64(got) {
			t.Errorf("WaitTimeout(%v) = %d, which epoll_wait reads as %d (negative: forever)", time.Duration(tc.wait), got, kernel)
		}
	}
}
