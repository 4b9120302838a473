package loop

import "time"

// timer is a slot in a loop's timer heap, embedded in what it times, so
// arming a timer allocates nothing. at is in nanoseconds of the loop's
// clock; index is the slot's place in the heap, -1 when not armed.
type timer struct {
	at    int64
	index int32
	fire  func(now int64)
}

// timerHeap is a binary min-heap on at. It is owned by one loop and not
// safe for concurrent use.
type timerHeap struct {
	h []*timer
}

func (t *timerHeap) len() int { return len(t.h) }

// arm sets tm to fire at at, moving it if it is already armed.
func (t *timerHeap) arm(tm *timer, at int64) {
	if tm.index >= 0 && int(tm.index) < len(t.h) && t.h[tm.index] == tm {
		old := tm.at
		tm.at = at
		if at < old {
			t.up(int(tm.index))
		} else {
			t.down(int(tm.index))
		}
		return
	}
	tm.at = at
	tm.index = int32(len(t.h))
	t.h = append(t.h, tm)
	t.up(len(t.h) - 1)
}

// stop disarms tm; stopping a timer that is not armed does nothing.
func (t *timerHeap) stop(tm *timer) {
	i := int(tm.index)
	if i < 0 || i >= len(t.h) || t.h[i] != tm {
		return
	}
	last := len(t.h) - 1
	if i != last {
		t.swap(i, last)
	}
	t.h[last] = nil
	t.h = t.h[:last]
	tm.index = -1
	if i != last {
		t.down(i)
		t.up(i)
	}
}

// next returns when the earliest timer is due; ok is false when none is
// armed.
func (t *timerHeap) next() (at int64, ok bool) {
	if len(t.h) == 0 {
		return 0, false
	}
	return t.h[0].at, true
}

// fireDue fires, in deadline order, every timer due at now. A timer's fire
// may arm timers (itself included); one armed for now or earlier fires in
// this same call.
func (t *timerHeap) fireDue(now int64) {
	for len(t.h) > 0 && t.h[0].at <= now {
		tm := t.h[0]
		t.stop(tm)
		tm.fire(now)
	}
}

func (t *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if t.h[p].at <= t.h[i].at {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *timerHeap) down(i int) {
	n := len(t.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.h[r].at < t.h[l].at {
			m = r
		}
		if t.h[i].at <= t.h[m].at {
			return
		}
		t.swap(i, m)
		i = m
	}
}

func (t *timerHeap) swap(i, j int) {
	t.h[i], t.h[j] = t.h[j], t.h[i]
	t.h[i].index = int32(i)
	t.h[j].index = int32(j)
}

// maxWaitMs caps epoll_wait's timeout, as the Go runtime's netpoller
// caps its own (1e9 ms, about 11.5 days). The kernel reads the timeout as
// a C int: a timer more than 2^31-1 ms (24.8 days) away would otherwise
// reach it as a negative number, "wait forever", and never fire. A loop
// that wakes at the cap finds nothing due and waits again.
const maxWaitMs = 1_000_000_000

// waitTimeout is epoll_wait's timeout, in milliseconds rounded up, for a
// timer due in wait nanoseconds.
func waitTimeout(wait int64) int {
	if wait >= maxWaitMs*int64(time.Millisecond) {
		return maxWaitMs // and no overflow rounding up a wait near MaxInt64
	}
	return int(max(0, (wait+int64(time.Millisecond)-1)/int64(time.Millisecond)))
}
