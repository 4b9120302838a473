package clock

import (
	"sync"
	"time"
)

// Fake is a Clock that moves only when a test moves it (Advance, Set), for
// code that cannot run under testing/synctest: goroutines waiting on real
// sockets (an event loop in epoll_wait, a backend's accept) are never
// durably blocked, so a bubble's clock would not move past them. It is safe
// for concurrent use; the zero value is not usable, call NewFake.
//
// Its timers behave as time's do, on its time: a timer fires once the
// clock reaches its deadline, those due at the same instant in the order
// they were armed, each seeing Now at its own deadline; a timer armed with
// a deadline not after Now fires at once. Stop and Reset report whether the
// timer was still to fire, and after either no stale value is received
// from its channel (Go 1.23 timers).
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	armed  []*fakeTimer // unordered; tests arm a handful
	armSeq uint64       // orders timers due at the same instant
}

// NewFake returns a Fake that reads start until it is moved.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// fakeTimer is a timer of a Fake: it calls fn on a goroutine of its own,
// or, fn nil, sends the time on ch (buffered 1, drained by Stop and Reset).
type fakeTimer struct {
	c     *Fake
	fn    func()
	ch    chan time.Time
	when  time.Time
	seq   uint64
	index int // in c.armed; -1: not armed
}

// Now is the Fake's current time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms a timer that calls f on a goroutine of its own once the
// clock has moved d on. Advance waits for the calls it makes to return.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	t := &fakeTimer{c: c, fn: f, index: -1}
	t.Reset(d)
	return t
}

// NewTimer arms a timer whose channel receives the time once the clock has
// moved d on.
func (c *Fake) NewTimer(d time.Duration) (Timer, <-chan time.Time) {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), index: -1}
	t.Reset(d)
	return t, t.ch
}

// Advance moves the clock d on, firing in order every timer whose deadline
// it passes, including those armed meanwhile by the timers' own callbacks.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	c.moveLocked(c.now.Add(d))
}

// Set moves the clock on to t, as Advance does. It panics if t is before
// Now: this clock's readings are monotonic, like time.Now's.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	if t.Before(c.now) {
		c.mu.Unlock()
		panic("clock: Fake.Set would move the clock back")
	}
	c.moveLocked(t)
}

// moveLocked fires the timers due by end, then sets the time to end; c.mu
// is held on entry and released on return. The time never goes back, not
// even when another move overtook this one while a callback ran.
func (c *Fake) moveLocked(end time.Time) {
	for {
		t := c.firstDueLocked(end)
		if t == nil {
			break
		}
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.disarmLocked(t)
		if t.fn == nil {
			t.ch <- c.now // empty: an armed timer's value was drained
			continue
		}
		c.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.fn()
		}()
		<-done
		c.mu.Lock()
	}
	if end.After(c.now) {
		c.now = end
	}
	c.mu.Unlock()
}

// firstDueLocked is the armed timer to fire first if it is due by end, or
// nil; c.mu is held.
func (c *Fake) firstDueLocked(end time.Time) *fakeTimer {
	var first *fakeTimer
	for _, t := range c.armed {
		if first == nil || t.when.Before(first.when) || (t.when.Equal(first.when) && t.seq < first.seq) {
			first = t
		}
	}
	if first == nil || first.when.After(end) {
		return nil
	}
	return first
}

// disarmLocked takes t off the armed list; c.mu is held.
func (c *Fake) disarmLocked(t *fakeTimer) {
	last := len(c.armed) - 1
	c.armed[t.index] = c.armed[last]
	c.armed[t.index].index = t.index
	c.armed[last] = nil
	c.armed = c.armed[:last]
	t.index = -1
}

// Stop disarms t; true if it was still to fire (for a channel timer: or
// had fired and its value was not yet received, which Stop discards).
func (t *fakeTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.stopLocked()
}

func (t *fakeTimer) stopLocked() bool {
	pending := t.index >= 0
	if pending {
		t.c.disarmLocked(t)
	}
	if t.ch != nil {
		select {
		case <-t.ch:
			pending = true
		default:
		}
	}
	return pending
}

// Reset re-arms t to fire once the clock has moved d on; true if it was
// still to fire, as for Stop.
func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := t.stopLocked()
	switch {
	case d > 0:
		t.when = c.now.Add(d)
		c.armSeq++
		t.seq = c.armSeq
		t.index = len(c.armed)
		c.armed = append(c.armed, t)
	case t.fn == nil: // due now: fire at once, as time's timers do
		t.ch <- c.now
	default:
		go t.fn()
	}
	return pending
}
