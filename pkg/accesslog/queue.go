package accesslog

import (
	"net/netip"
	"sync/atomic"
	"time"
)

// Record is one access log record: a connection or UDP session that
// ended (EventClose), or one still open (EventConnect, EventInterim).
// It holds no pointer of its own beyond strings that outlive it, so the
// queue stores it by value and a record costs no allocation.
type Record struct {
	End      int64         // when it was written (for a close, when it ended): wall clock, Unix ns
	Duration time.Duration // from accept (a session's first datagram) to End, on the loop's clock
	Listener string
	Pool     string
	Client   netip.AddrPort
	// Backend is the backend's addr as configured; "" when the client
	// never reached one.
	Backend string
	// Bytes delivered to the backend and to the client (so far, on a
	// record of a connection still open).
	ToBackend, ToClient int64
	// Reason is how it ended (pkg/relay's CloseReason names, pkg/udpsession's
	// SessionEnd names), Result its result as l4lb_client_connections_total
	// counts it ("ok", "failed", "rejected"); both "" on a record of one
	// still open. Both are static strings: a record holds no pointer that
	// is not shared.
	Reason, Result string
	// Route and ServerName: on a listener with SNI routes, the route that
	// took the client ("" for the listener's own pool) and the server
	// name of its ClientHello ("" when none).
	Route, ServerName string
	// Routed: the listener has SNI routes, so JSON writes Route and
	// ServerName even when both are empty (a client with no server name,
	// not TLS, or refused before its ClientHello).
	Routed bool
	// Event is what the record is about; the zero value is a close.
	Event Event
	// UDP: a UDP session's record, with its datagrams each way.
	UDP                                   bool
	DatagramsToBackend, DatagramsToClient int64
}

// Event is what a record reports: a connection's (or session's) end, its
// backend connection established, or where it stands while still open.
type Event uint8

const (
	// EventClose: it ended; the one record every connection and session
	// writes.
	EventClose Event = iota
	// EventConnect: the backend connection was established (TCP, with
	// [log] access_on_connect).
	EventConnect
	// EventInterim: still open, once every [log] access_interval.
	EventInterim
	numEvents
)

var eventNames = [numEvents]string{"close", "connect", "interim"}

func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return "unknown"
}

// Queue carries access records from the loops to one writer
// goroutine: a ring per loop with the loop as its only producer and the
// writer as its only consumer, so a push is two atomic loads, a copy and
// an atomic store, never a lock, a syscall or an allocation. A full ring
// drops the record and counts it: a loop never waits for log I/O.
//
// The writer is woken through a channel only when it said it is about to
// sleep (waiting), so a busy loop does not wake it once per record: while
// it works, records pile up in the rings and go out as one batch.
type Queue struct {
	rings []ring
	// interval and onConnect are the records of open connections the
	// loops write (SetEvents), fixed before the loops see the queue.
	interval  int64
	onConnect bool

	dropped atomic.Int64
	waiting atomic.Bool
	wake    chan struct{}
}

// ring is one loop's single-producer, single-consumer ring.
type ring struct {
	head  atomic.Uint64 // next slot the writer reads
	_     [56]byte      // head and tail on their own cache lines
	tail  atomic.Uint64 // next slot the loop writes
	_     [56]byte
	mask  uint64
	slots []Record
}

// NewQueue returns a queue for loops event loops (ids 0..loops-1)
// holding up to perLoop records per loop (rounded up to a power of two,
// at least 16).
func NewQueue(loops, perLoop int) *Queue {
	size := 16
	for size < perLoop {
		size <<= 1
	}
	q := &Queue{rings: make([]ring, max(loops, 1)), wake: make(chan struct{}, 1)}
	for i := range q.rings {
		q.rings[i].mask = uint64(size - 1)
		q.rings[i].slots = make([]Record, size)
	}
	return q
}

// SetEvents asks the loops for records of connections still open: an
// interim record of each every interval (0: none) and, with onConnect, a
// record when its backend connection is established. Before the queue is
// handed to the loops.
func (q *Queue) SetEvents(interval time.Duration, onConnect bool) {
	q.interval, q.onConnect = int64(interval), onConnect
}

// Interval is how often each open connection gets an interim record, in
// ns; 0: never.
func (q *Queue) Interval() int64 { return q.interval }

// OnConnect reports whether a record is written when a backend connection
// is established.
func (q *Queue) OnConnect() bool { return q.onConnect }

// Push queues a copy of r from loop id, or drops and counts it when that
// loop's ring is full. Each id has one producer: call it only from loop
// id's goroutine (the loops do), or, in a test, from one goroutine per id.
func (q *Queue) Push(id int, r *Record) {
	if id < 0 || id >= len(q.rings) {
		q.dropped.Add(1) // a loop the queue was not made for: never share a ring
		return
	}
	g := &q.rings[id]
	t := g.tail.Load()
	if t-g.head.Load() > g.mask {
		q.dropped.Add(1)
		return
	}
	g.slots[t&g.mask] = *r
	g.tail.Store(t + 1)
	if q.waiting.Load() && q.waiting.CompareAndSwap(true, false) {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// Drain hands every queued record to f, ring by ring, and returns how many
// it handed. f must not keep the pointer. The writer's goroutine only.
func (q *Queue) Drain(f func(*Record)) int {
	n := 0
	for i := range q.rings {
		g := &q.rings[i]
		h, t := g.head.Load(), g.tail.Load()
		for ; h < t; h++ {
			s := &g.slots[h&g.mask]
			f(s)
			*s = Record{} // let go of the strings
			n++
		}
		g.head.Store(h)
	}
	return n
}

// pending reports whether any ring holds a record.
func (q *Queue) pending() bool {
	for i := range q.rings {
		if q.rings[i].tail.Load() != q.rings[i].head.Load() {
			return true
		}
	}
	return false
}

// Wait blocks the writer until a record may be queued; false once stop is
// closed. The writer's goroutine only, after a Drain.
func (q *Queue) Wait(stop <-chan struct{}) bool {
	q.waiting.Store(true)
	// A push that came before the flag was set did not wake anyone: look
	// again (the flag and the rings' tails are sequentially consistent, so
	// a push after this check sees the flag).
	if q.pending() {
		q.waiting.Store(false)
		return true
	}
	select {
	case <-q.wake:
		return true
	case <-stop:
		q.waiting.Store(false)
		return false
	}
}

// Dropped is the number of records lost: queue full, or counted by the
// writer with AddDropped.
func (q *Queue) Dropped() int64 { return q.dropped.Load() }

// AddDropped counts n records the writer could not write.
func (q *Queue) AddDropped(n int64) { q.dropped.Add(n) }

// Capacity is how many records the queue holds at most, all loops
// together.
func (q *Queue) Capacity() int { return len(q.rings) * len(q.rings[0].slots) }

// Sink is where a server's loops find the access log, TCP relays and UDP
// sessions alike: its queue, nil while the access log is off. Set and
// Load are safe from any goroutine.
type Sink struct{ q atomic.Pointer[Queue] }

// Set makes the loops push to q from now; nil turns the access log off.
func (s *Sink) Set(q *Queue) { s.q.Store(q) }

// Load is the queue to push to; nil when off.
func (s *Sink) Load() *Queue { return s.q.Load() }

// For is the queue a record of one listener goes to: nil while the access
// log is off, or when the listener keeps out of it (its access_log =
// false: listenerOn false), so it writes no line at all (connect, interim
// or close). The one place that decision is made, for TCP relays and UDP
// sessions alike: each record asks as it is written, so a reload that
// flips either switch applies to the connections and sessions open then
// as well as to later ones. A nil Sink is off.
func (s *Sink) For(listenerOn bool) *Queue {
	if s == nil || !listenerOn {
		return nil
	}
	return s.q.Load()
}
