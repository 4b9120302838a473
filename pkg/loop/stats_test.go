package loop

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Busy time is the stretch from a wake-up to the next wait that may sleep:
// work counts, waiting does not, and a non-blocking poll between two
// turns keeps the stretch going (published at most statsEvery late). On
// the loop's clock, moved by hand.
func TestStatsBusyIsWorkNotWaiting(t *testing.T) {
	l, err := New(3, NewShared(0, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer l.poll.close()
	var now int64
	l.testClock = func() int64 { return now }
	const ms = int64(time.Millisecond)

	l.stats.busySince = l.clock()
	now += 40 * ms // work
	l.beforeWait(true)
	if b := l.Stats().Busy; b != 40*time.Millisecond {
		t.Fatalf("busy %v after 40ms of work, want that", b)
	}

	now += 300 * ms // the wait
	l.now = l.clock()
	l.afterWait(true, 4)
	l.beforeWait(true)
	if b := l.Stats().Busy; b != 40*time.Millisecond {
		t.Fatalf("busy %v after a 300ms wait, want the 40ms of work only", b)
	}
	if e := l.Stats().Events; e != 4 {
		t.Fatalf("events %d, want 4", e)
	}

	// Work, then a turn that polls without blocking: nothing is published
	// until statsEvery has passed, and then the whole stretch is.
	l.now = l.clock()
	l.afterWait(true, 1)
	before := l.Stats()
	now += statsEvery - 1 // work
	l.now = l.clock()
	l.afterWait(false, 2)
	l.beforeWait(false)
	if got := l.Stats(); got != before {
		t.Fatalf("a poll less than statsEvery into the work published %+v over %+v", got, before)
	}
	now++
	l.now = l.clock()
	l.afterWait(false, 0)
	l.beforeWait(false)
	got := l.Stats()
	if got.Events != 7 || got.Busy-before.Busy != time.Duration(statsEvery) {
		t.Fatalf("after %v of work without blocking: %+v, want 7 events and that much more busy than %v",
			time.Duration(statsEvery), got, before.Busy)
	}
	if got.ID != 3 {
		t.Fatalf("ID %d, want 3", got.ID)
	}
}

// A running loop publishes its connections, events, sleeps and coalesced
// waits, and counts a task's run as busy.
func TestStatsOfARunningLoop(t *testing.T) {
	k := testnet.StartTaker(t)
	var now atomic.Int64 // the loop's clock, moved by its tasks only
	h := newHarness(t, harnessOpts{clock: now.Load, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	l := h.loops[0]
	start := l.Stats()

	p := h.open("p", k)
	p.ping(t)
	if !waitUntil(20*time.Second, func() bool { return l.Stats().Conns == 1 }) {
		t.Fatalf("loop stats show %d connections, want 1", l.Stats().Conns)
	}
	h.on(l, func() { now.Add(int64(50 * time.Millisecond)) }) // a task that works 50ms
	if !waitUntil(20*time.Second, func() bool { return l.Stats().Busy-start.Busy == 50*time.Millisecond }) {
		t.Fatalf("busy grew by %v over a 50ms task", l.Stats().Busy-start.Busy)
	}
	p.close()
	if !waitUntil(20*time.Second, func() bool { return l.Stats().Conns == 0 }) {
		t.Fatalf("loop stats show %d connections after the close, want 0", l.Stats().Conns)
	}
	var end Stats
	h.on(l, func() {
		l.poll.gathers++ // as a coalesced window would
		l.beforeWait(true)
		end = l.Stats()
	})
	// accept, connect, data and both hang-ups, the tasks: more than five
	if end.Events-start.Events < 5 || end.Sleeps <= start.Sleeps || end.Coalesced != start.Coalesced+1 {
		t.Fatalf("stats went from %+v to %+v: want events, sleeps and the coalesced wait counted", start, end)
	}
}
