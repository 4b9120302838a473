package reactor

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
)

// Busy time is the stretch from a wake-up to the next wait that may sleep:
// work counts, waiting does not, and a non-blocking poll between two
// turns keeps the stretch going (published at most statsEvery late). On
// the loop's clock, moved by hand.
func TestStatsBusyIsWorkNotWaiting(t *testing.T) {
	start := time.Now()
	clk := clock.NewFake(start)
	l, err := New(Config{ID: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.poll.close()
	const ms = time.Millisecond
	// As run ends a turn: a reading of the clock, then the wait.
	beforeWait := func(block bool) { l.beforeWait(block, l.Clock()) }

	l.stats.busySince = l.Clock()
	clk.Advance(40 * ms) // work
	beforeWait(true)
	if b := l.Stats().Busy; b != 40*time.Millisecond {
		t.Fatalf("busy %v after 40ms of work, want that", b)
	}

	clk.Advance(300 * ms) // the wait
	l.now = l.Clock()
	l.afterWait(true, 4)
	beforeWait(true)
	if b := l.Stats().Busy; b != 40*time.Millisecond {
		t.Fatalf("busy %v after a 300ms wait, want the 40ms of work only", b)
	}
	if e := l.Stats().Events; e != 4 {
		t.Fatalf("events %d, want 4", e)
	}

	// Work, then a turn that polls without blocking: nothing is published
	// until statsEvery has passed, and then the whole stretch is.
	l.now = l.Clock()
	l.afterWait(true, 1)
	before := l.Stats()
	clk.Advance(time.Duration(statsEvery) - 1) // work
	l.now = l.Clock()
	l.afterWait(false, 2)
	beforeWait(false)
	if got := l.Stats(); got != before {
		t.Fatalf("a poll less than statsEvery into the work published %+v over %+v", got, before)
	}
	clk.Advance(1)
	l.now = l.Clock()
	l.afterWait(false, 0)
	beforeWait(false)
	got := l.Stats()
	if got.Events != 7 || got.Busy-before.Busy != time.Duration(statsEvery) {
		t.Fatalf("after %v of work without blocking: %+v, want 7 events and that much more busy than %v",
			time.Duration(statsEvery), got, before.Busy)
	}
	if got.ID != 3 {
		t.Fatalf("ID %d, want 3", got.ID)
	}
}

// A running loop publishes its events, sleeps and coalesced waits, and
// counts a task's run as busy.
func TestStatsOfARunningLoop(t *testing.T) {
	l, clk, stop := startOnFakeClock(t)
	defer stop()
	start := l.Stats()
	l.Do(func() { clk.Advance(50 * time.Millisecond) }) // a task that works 50ms
	if !testnet.WaitUntil(20*time.Second, func() bool { return l.Stats().Busy-start.Busy == 50*time.Millisecond }) {
		t.Fatalf("busy grew by %v over a 50ms task", l.Stats().Busy-start.Busy)
	}
	for range 5 {
		l.Do(func() {}) // each its own wake-up: an event and a sleep
	}
	var end Stats
	l.Do(func() {
		l.poll.gathers++ // as a coalesced window would
		l.beforeWait(true, l.Clock())
		end = l.Stats()
	})
	if end.Events-start.Events < 6 || end.Sleeps <= start.Sleeps || end.Coalesced != start.Coalesced+1 {
		t.Fatalf("stats went from %+v to %+v: want events, sleeps and the coalesced wait counted", start, end)
	}
}

// startOnFakeClock starts a loop on a fake clock; stop stops it and waits
// for it (deferred, so it runs before the test's cleanups close what the
// loop watches).
func startOnFakeClock(t *testing.T) (l *Loop, clk *clock.Fake, stop func()) {
	t.Helper()
	clk = clock.NewFake(time.Now())
	l, err := New(Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	return l, clk, func() { l.Stop(); l.Wait() }
}
