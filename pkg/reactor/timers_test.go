package reactor

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Timers fire in deadline order, each exactly once, whatever order they
// were armed, moved and stopped in.
func TestTimersFireInDeadlineOrder(t *testing.T) {
	var h timerHeap
	r := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	var fired []int64
	timers := make([]Timer, n)
	want := map[int]int64{}
	for i := range timers {
		timers[i].OnFire(func(now int64) { fired = append(fired, timers[i].at) })
		h.arm(&timers[i], r.Int64N(1_000_000))
		want[i] = timers[i].at
	}
	// Move a third, stop a sixth.
	for i := 0; i < n; i += 3 {
		h.arm(&timers[i], r.Int64N(1_000_000))
		want[i] = timers[i].at
	}
	for i := 1; i < n; i += 6 {
		h.stop(&timers[i])
		h.stop(&timers[i]) // twice: no effect
		delete(want, i)
	}
	for now := int64(0); now <= 1_000_000; now += 1000 {
		before := len(fired)
		h.fireDue(now)
		for _, at := range fired[before:] {
			if at > now {
				t.Fatalf("timer due at %d fired at %d", at, now)
			}
		}
	}
	if !slices.IsSorted(fired) {
		t.Fatal("timers fired out of deadline order")
	}
	if len(fired) != len(want) {
		t.Fatalf("%d timers fired, want %d", len(fired), len(want))
	}
	if h.len() != 0 {
		t.Fatalf("%d timers left armed", h.len())
	}
}

// A timer that re-arms itself from its fire function (the idle timer does)
// fires again at its new deadline, not in a loop.
func TestTimerRearmsItselfFromFire(t *testing.T) {
	var h timerHeap
	count := 0
	var tm Timer
	tm.OnFire(func(now int64) {
		count++
		if count < 3 {
			h.arm(&tm, now+10)
		}
	})
	h.arm(&tm, 10)
	h.fireDue(10)
	if count != 1 {
		t.Fatalf("fired %d times at 10, want 1", count)
	}
	h.fireDue(25)
	h.fireDue(30)
	h.fireDue(100)
	if count != 3 || h.len() != 0 {
		t.Fatalf("fired %d times, %d armed; want 3, 0", count, h.len())
	}
}

func BenchmarkTimerArmStop(b *testing.B) {
	var h timerHeap
	timers := make([]Timer, 10000)
	for i := range timers {
		timers[i].OnFire(func(int64) {})
		h.arm(&timers[i], int64(i*7919%10000))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tm := &timers[i%len(timers)]
		h.stop(tm)
		h.arm(tm, int64(i%10000))
		i++
	}
}
