package reactor

// Timer is a slot in a loop's timer heap, embedded in what it times, so
// arming a timer allocates nothing. Its zero value is a timer not armed
// that fires nothing: set what it fires with OnFire or FireTo once.
type Timer struct {
	at   int64 // ns of the loop's clock
	pos  int32 // the slot's place in the heap, plus one; 0: not armed
	fire Firer
}

// Firer is what a timer calls when it fires, with the loop's clock then.
type Firer interface{ Fire(now int64) }

// FireFunc is a function as a Firer.
type FireFunc func(now int64)

// Fire calls f.
func (f FireFunc) Fire(now int64) { f(now) }

// OnFire sets what t calls when it fires (with the loop's clock then).
func (t *Timer) OnFire(f func(now int64)) { t.fire = FireFunc(f) }

// FireTo makes o what t calls when it fires: for a value that embeds its
// timer and is its own callback, which, unlike a method value (a closure
// per timer set), costs no allocation.
func (t *Timer) FireTo(o Firer) { t.fire = o }

// Armed reports whether t is armed.
func (t *Timer) Armed() bool { return t.pos > 0 }

// At is when t is due, while it is armed.
func (t *Timer) At() int64 { return t.at }

// Arm sets t to fire at at (the loop's clock), moving it if it is already
// armed.
func (l *Loop) Arm(t *Timer, at int64) { l.timers.arm(t, at) }

// Disarm stops t; disarming a timer that is not armed does nothing.
func (l *Loop) Disarm(t *Timer) { l.timers.stop(t) }

// TimersArmed is how many timers are armed.
func (l *Loop) TimersArmed() int { return l.timers.len() }

// FireDue fires every timer due at now, on the loop's goroutine. A
// running loop does so each turn; tests call it to fire timers at an
// instant of their choosing.
func (l *Loop) FireDue(now int64) { l.timers.fireDue(now) }

// timerHeap is a binary min-heap on at. It is owned by one loop and not
// safe for concurrent use.
type timerHeap struct {
	h []*Timer
}

func (t *timerHeap) len() int { return len(t.h) }

// arm sets tm to fire at at, moving it if it is already armed.
func (t *timerHeap) arm(tm *Timer, at int64) {
	if i := int(tm.pos) - 1; i >= 0 && i < len(t.h) && t.h[i] == tm {
		old := tm.at
		tm.at = at
		if at < old {
			t.up(i)
		} else {
			t.down(i)
		}
		return
	}
	tm.at = at
	tm.pos = int32(len(t.h)) + 1
	t.h = append(t.h, tm)
	t.up(len(t.h) - 1)
}

// stop disarms tm; stopping a timer that is not armed does nothing.
func (t *timerHeap) stop(tm *Timer) {
	i := int(tm.pos) - 1
	if i < 0 || i >= len(t.h) || t.h[i] != tm {
		return
	}
	last := len(t.h) - 1
	if i != last {
		t.swap(i, last)
	}
	t.h[last] = nil
	t.h = t.h[:last]
	tm.pos = 0
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
		if tm.fire != nil {
			tm.fire.Fire(now)
		}
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
	t.h[i].pos = int32(i) + 1
	t.h[j].pos = int32(j) + 1
}
