package loop

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/splice"
)

// CloseReason says how a TCP client connection ended. Every client a loop
// accepts ends with exactly one: counted per listener (Front.Closed) and,
// with the access log on, written as one line.
type CloseReason uint8

const (
	// Relayed connections (the client was connected to a backend).

	// CloseCompleted: both directions ended with a FIN.
	CloseCompleted CloseReason = iota
	// CloseClientReset: the client's socket failed (a reset, or another
	// socket error); the backend was reset in turn.
	CloseClientReset
	// CloseBackendReset: the backend's socket failed, its handshake's
	// reset included; the client was reset in turn.
	CloseBackendReset
	// CloseIdleTimeout: nothing moved for the pool's idle_timeout; both
	// sides were reset.
	CloseIdleTimeout
	// CloseShutdown: cut with a reset on both sides when a drain ran out
	// of time (shutdown_timeout, a second signal) or the loops stopped;
	// a client still being dialed for is cut too (result rejected).
	CloseShutdown
	// CloseDrained: cut with a reset on both sides when an operator's
	// drain of its backend reached its deadline.
	CloseDrained

	// Refused clients (never connected to a backend).

	// CloseConnectionCap: max_connections clients were open; closed at
	// once.
	CloseConnectionCap
	// CloseNoBackend: every allowed dial failed, or no backend could be
	// tried (result failed).
	CloseNoBackend
	// CloseLocalError: this host's trouble (out of fds, ports, memory)
	// kept the client from being served; no backend is blamed.
	CloseLocalError
	// CloseLoop: the client was one of l4lb's own backend connections (a
	// backend leading back to a listener); reset.
	CloseLoop
	// CloseClientLeft: the client reset (or closed both ways) while its
	// backend was being dialed (or its PROXY header awaited, or a slot
	// queued for); the dial was called off.
	CloseClientLeft
	// CloseDenied: the client's address is in the listener's deny list,
	// or not in its allow list.
	CloseDenied
	// CloseSourceConnections: the client's address had
	// max_connections_per_source connections open.
	CloseSourceConnections
	// CloseSourceRate: the client's address went past rate_per_source.
	CloseSourceRate
	// CloseBackendCap: every usable backend was at its max_connections
	// (and stayed so for queue_timeout).
	CloseBackendCap
	// CloseProxyUntrusted: a peer outside trusted_proxies on a listener
	// that accepts PROXY headers; reset before reading a byte.
	CloseProxyUntrusted
	// CloseProxyHeader: the PROXY header was malformed (or the peer
	// closed before sending one); nothing was forwarded.
	CloseProxyHeader
	// CloseProxyTimeout: no complete PROXY header within proxy_timeout.
	CloseProxyTimeout

	NumCloseReasons
)

var closeReasonNames = [NumCloseReasons]string{
	"completed", "client_reset", "backend_reset", "idle_timeout", "shutdown", "drained",
	"connection_cap", "no_backend", "local_error", "loop", "client_left",
	"denied", "source_connections", "source_rate", "backend_cap",
	"proxy_untrusted", "proxy_header", "proxy_timeout",
}

func (r CloseReason) String() string {
	if r < NumCloseReasons {
		return closeReasonNames[r]
	}
	return "unknown"
}

// outcome is the relay outcome a reason stands for (the breaker's early
// reset verdict and the debug log read it).
func (r CloseReason) outcome() splice.Outcome {
	switch r {
	case CloseCompleted:
		return splice.Completed
	case CloseClientReset:
		return splice.ClientReset
	case CloseBackendReset:
		return splice.BackendReset
	case CloseIdleTimeout:
		return splice.IdleTimeout
	}
	return splice.Aborted
}

// ClientResult is a client connection's result as
// l4lb_client_connections_total counts it.
type ClientResult uint8

const (
	ResultOK       ClientResult = iota // connected to a backend
	ResultFailed                       // no backend could be dialed
	ResultRejected                     // the cap, local trouble, a loop, a client that left, a cut dial
	NumClientResults
)

var clientResultNames = [NumClientResults]string{"ok", "failed", "rejected"}

func (r ClientResult) String() string {
	if r < NumClientResults {
		return clientResultNames[r]
	}
	return "unknown"
}

// AccessRecord is one ended client connection as the access log writes it.
// It holds no pointer of its own beyond strings that outlive it, so the
// queue stores it by value and a record costs no allocation.
type AccessRecord struct {
	End      int64         // when it ended: wall clock, Unix ns
	Duration time.Duration // from accept to end, on the loop's clock
	Listener string
	Pool     string
	Client   netip.AddrPort
	// Backend is the backend's addr as configured; "" when the client
	// never reached one.
	Backend string
	// Bytes delivered to the backend and to the client.
	ToBackend, ToClient int64
	Reason              CloseReason
	Result              ClientResult
}

// SetAccessLog makes the loops hand every ended client connection to q;
// nil turns the access log off (the loops then only check the pointer).
// Safe while the loops run.
func (s *Shared) SetAccessLog(q *AccessQueue) { s.access.Store(q) }

// AccessLog is the queue the loops hand records to; nil when off.
func (s *Shared) AccessLog() *AccessQueue { return s.access.Load() }

// record counts a client connection that ended on this loop and, with the
// access log on, queues its record.
func (c *conn) record(why CloseReason, relayed bool) {
	f := c.f
	f.Closed[why].Add(1)
	q := c.l.sh.access.Load()
	if q == nil {
		return
	}
	r := AccessRecord{
		End: time.Now().UnixNano(), Duration: time.Duration(c.l.now - c.born),
		Listener: f.Name, Pool: c.pool.Name, Client: c.src, Reason: why, Result: ResultRejected,
	}
	switch {
	case relayed && why != CloseLocalError:
		// A connection that reached relaying and then met this host's
		// trouble (its PROXY header not sent) was never served:
		// rejected, as l4lb_client_connections_total counts it.
		r.Result, r.Backend = ResultOK, c.backend.Addr
		r.ToBackend, r.ToClient = c.streams[0].Delivered, c.streams[1].Delivered
	case why == CloseNoBackend:
		r.Result = ResultFailed
	}
	q.Push(c.l.id, &r)
}

// refusedAtAccept counts (and logs) a client closed before it became a
// connection of the loop: at the cap, or one whose socket it cannot watch.
func (l *Loop) refusedAtAccept(f *Front, src netip.AddrPort, why CloseReason) {
	f.Closed[why].Add(1)
	q := l.sh.access.Load()
	if q == nil {
		return
	}
	r := AccessRecord{End: time.Now().UnixNano(), Listener: f.Name, Client: src, Reason: why, Result: ResultRejected}
	if p := f.Pool(); p != nil {
		r.Pool = p.Name
	}
	q.Push(l.id, &r)
}

// AccessQueue carries access records from the loops to one writer
// goroutine: a ring per loop with the loop as its only producer and the
// writer as its only consumer, so a push is two atomic loads, a copy and
// an atomic store, never a lock, a syscall or an allocation. A full ring
// drops the record and counts it: a loop never waits for log I/O.
//
// The writer is woken through a channel only when it said it is about to
// sleep (waiting), so a busy loop does not wake it once per record: while
// it works, records pile up in the rings and go out as one batch.
type AccessQueue struct {
	rings   []accessRing
	dropped atomic.Int64
	waiting atomic.Bool
	wake    chan struct{}
}

// accessRing is one loop's single-producer, single-consumer ring.
type accessRing struct {
	head  atomic.Uint64 // next slot the writer reads
	_     [56]byte      // head and tail on their own cache lines
	tail  atomic.Uint64 // next slot the loop writes
	_     [56]byte
	mask  uint64
	slots []AccessRecord
}

// NewAccessQueue returns a queue for loops event loops (ids 0..loops-1)
// holding up to perLoop records per loop (rounded up to a power of two,
// at least 16).
func NewAccessQueue(loops, perLoop int) *AccessQueue {
	size := 16
	for size < perLoop {
		size <<= 1
	}
	q := &AccessQueue{rings: make([]accessRing, max(loops, 1)), wake: make(chan struct{}, 1)}
	for i := range q.rings {
		q.rings[i].mask = uint64(size - 1)
		q.rings[i].slots = make([]AccessRecord, size)
	}
	return q
}

// Push queues a copy of r from loop id, or drops and counts it when that
// loop's ring is full. Each id has one producer: call it only from loop
// id's goroutine (the loops do), or, in a test, from one goroutine per id.
func (q *AccessQueue) Push(id int, r *AccessRecord) {
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
func (q *AccessQueue) Drain(f func(*AccessRecord)) int {
	n := 0
	for i := range q.rings {
		g := &q.rings[i]
		h, t := g.head.Load(), g.tail.Load()
		for ; h < t; h++ {
			s := &g.slots[h&g.mask]
			f(s)
			*s = AccessRecord{} // let go of the strings
			n++
		}
		g.head.Store(h)
	}
	return n
}

// pending reports whether any ring holds a record.
func (q *AccessQueue) pending() bool {
	for i := range q.rings {
		if q.rings[i].tail.Load() != q.rings[i].head.Load() {
			return true
		}
	}
	return false
}

// Wait blocks the writer until a record may be queued; false once stop is
// closed. The writer's goroutine only, after a Drain.
func (q *AccessQueue) Wait(stop <-chan struct{}) bool {
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
func (q *AccessQueue) Dropped() int64 { return q.dropped.Load() }

// AddDropped counts n records the writer could not write.
func (q *AccessQueue) AddDropped(n int64) { q.dropped.Add(n) }

// Capacity is how many records the queue holds at most, all loops
// together.
func (q *AccessQueue) Capacity() int { return len(q.rings) * len(q.rings[0].slots) }
