package accesslog

// Interim records ([log] access_interval) are spread over the interval
// instead of written in one burst: each loop keeps its open connections
// (or sessions) in a Schedule ordered by when each was last written, and
// a timer of its own takes the ones an interval old at most every
// 1/Ticks of the interval, a bounded number per look. A look then costs
// O(open/Ticks), never O(open), whatever the number of connections; an
// interval with no connection open costs nothing.

// Ticks is how many looks a Schedule is taken with per interval at most:
// at 1 s, every 20 ms.
const Ticks = 50

// minBudget is the fewest entries a look takes: a handful of connections
// do not need a look each.
const minBudget = 16

// Entry is one connection's (or session's) place in a Schedule, embedded
// in it; v is the connection itself.
type Entry[T any] struct {
	prev, next *Entry[T]
	mark       int64 // when it was listed or last written, on the loop's clock
	listed     bool
	v          T
}

// Listed reports whether e is in a Schedule.
func (e *Entry[T]) Listed() bool { return e.listed }

// Schedule is one loop's open connections as an intrusive list in the
// order their interim records are due: the tail was written (or listed)
// longest ago. Listing, taking off and writing move an entry in O(1) and
// keep the order, since every mark is the loop's clock when it happened.
// One goroutine (the loop's) only.
type Schedule[T any] struct {
	head, tail *Entry[T] // head: marked last
	n          int
}

// Add lists e for v, marked now: its first interim record is due an
// interval from now.
func (s *Schedule[T]) Add(e *Entry[T], v T, now int64) {
	if e.listed {
		return
	}
	e.v, e.mark, e.listed = v, now, true
	s.pushHead(e)
	s.n++
}

func (s *Schedule[T]) pushHead(e *Entry[T]) {
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	} else {
		s.tail = e
	}
	s.head = e
}

func (s *Schedule[T]) unlink(e *Entry[T]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// Remove takes e off the schedule (its connection ended or moved); a no-op
// for an entry not listed.
func (s *Schedule[T]) Remove(e *Entry[T]) {
	if !e.listed {
		return
	}
	s.unlink(e)
	e.listed = false
	var zero T
	e.v = zero
	s.n--
}

// Len is the number of entries listed.
func (s *Schedule[T]) Len() int { return s.n }

// Budget is the most entries one look takes with n listed: twice the
// share of a look, so a burst of connections opened together (all due at
// once) spreads over the next looks, and a look never costs more than
// O(n/Ticks).
func Budget(n int) int { return max(2*((n+Ticks-1)/Ticks), minBudget) }

// Take hands write the entries due at now (marked an interval ago or
// more), longest due first, at most Budget of them, marking each now. It
// returns how many it handed and when to look next: when the next entry
// falls due, but no sooner than a tick from now; 0 with nothing listed.
func (s *Schedule[T]) Take(now, interval int64, write func(T)) (taken int, next int64) {
	budget := Budget(s.n)
	for e := s.tail; e != nil && taken < budget && e.mark+interval <= now; e = s.tail {
		s.unlink(e)
		e.mark = now
		s.pushHead(e)
		taken++
		write(e.v)
	}
	if s.tail == nil {
		return taken, 0
	}
	return taken, max(s.tail.mark+interval, now+max(interval/Ticks, 1))
}

// Clear takes every entry off (the access log went off).
func (s *Schedule[T]) Clear() {
	for s.tail != nil {
		s.Remove(s.tail)
	}
}
