package reactor

import (
	"sync/atomic"
	"time"
)

// Stats is what one event loop has done since it started, for metrics:
// how much of its time went to work, and how it waited. An operator reads
// saturation from Busy (its rate is the loop's utilisation), and what
// wake_coalesce and busy_poll do from Events per Sleep and from Coalesced.
type Stats struct {
	ID int
	// Busy is the time the loop spent handling events, timers and tasks;
	// the rest it waited (a busy_poll spin or a coalescing window is
	// waiting too).
	Busy time.Duration
	// Events counts the readiness events it handled.
	Events uint64
	// Sleeps counts the waits it made with nothing left to do: each may
	// put its thread to sleep, and whoever sends its next packet pays to
	// wake it.
	Sleeps uint64
	// Coalesced counts the waits that slept out a wake_coalesce window.
	Coalesced uint64
}

// statsEvery is how stale a busy loop lets its published Stats get: it
// publishes before each wait that may sleep, and at least this often
// while it never does.
const statsEvery = int64(10 * time.Millisecond)

// loopStats is the loop's own running count (busy, events) and the copy
// it publishes for other goroutines.
type loopStats struct {
	busy      int64 // ns, up to busySince
	busySince int64 // loop clock when the current stretch of work began
	events    uint64
	at        int64 // loop clock of the last publication

	pubBusy, pubEvents, pubSleeps, pubCoalesced atomic.Uint64
}

// beforeWait ends the stretch of work that the coming wait closes, if it
// may sleep (block), at the wait's reading of the clock (at), and
// publishes the counts when they are due.
func (l *Loop) beforeWait(block bool, at int64) {
	st := &l.stats
	var now int64
	switch {
	case block:
		now = at
	case l.now-st.at >= statsEvery:
		now = l.now
	default:
		return
	}
	st.busy += now - st.busySince
	st.busySince = now
	st.at = now
	st.pubBusy.Store(uint64(st.busy))
	st.pubEvents.Store(st.events)
	st.pubSleeps.Store(uint64(l.poll.sleeps))
	st.pubCoalesced.Store(uint64(l.poll.gathers))
}

// afterWait starts a stretch of work when the wait could have slept.
func (l *Loop) afterWait(block bool, events int) {
	l.stats.events += uint64(events)
	if block {
		l.stats.busySince = l.now
	}
}

// Stats returns the loop's counts as last published (at most statsEvery
// old while it is busy, exact while it waits). Safe from any goroutine.
func (l *Loop) Stats() Stats {
	st := &l.stats
	return Stats{
		ID:        l.id,
		Busy:      time.Duration(st.pubBusy.Load()),
		Events:    st.pubEvents.Load(),
		Sleeps:    st.pubSleeps.Load(),
		Coalesced: st.pubCoalesced.Load(),
	}
}

// CoalescedWaits is how many waits slept out a wake_coalesce window so
// far: on the loop's goroutine, exact (Stats is as of the last
// publication).
func (l *Loop) CoalescedWaits() int { return l.poll.gathers }
