package relay

import (
	"sync/atomic"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/clienthello"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxyproto"
	"github.com/l4lb/l4lb/pkg/reactor"
	"github.com/l4lb/l4lb/pkg/splice"
)

// Loop is the TCP relay of one event loop: its listening sockets, the
// connections it holds, and their scratch memory. Its methods other than
// CloseListeners, CutAll, CutBackend, UnwatchListeners and Conns are for
// the loop's goroutine only.
type Loop struct {
	r       *reactor.Loop
	sh      *Shared
	scratch *splice.Scratch

	lsocks []*lsock
	held   connList // every connection the loop holds

	// waiting are the clients queued for a backend slot (queue.go), and
	// queueTimer their retry; hdr holds a PROXY header being read or
	// written.
	waiting    []*conn
	queueTimer reactor.Timer
	srcNext    uint32 // turns the pools' source addresses (connect.go)
	hdr        [proxyproto.MaxLength]byte
	// peek holds a ClientHello being inspected and hellos reads it
	// (inspect.go); made at the first, so loops of listeners without
	// routes never hold them.
	peek   []byte
	hellos *clienthello.Reader
	// dials and routes are the dial states and routed clients' routes
	// given back by connections before (freelist.go).
	dials  freeList[dialState]
	routes freeList[routed]
	// interim are the relaying connections due interim access records
	// (access_interval), interimTimer the next look at them (access.go).
	interim      accesslog.Schedule[*conn]
	interimTimer reactor.Timer

	nconns atomic.Int64
}

// New adds a TCP relay to loop r; before r starts.
func New(r *reactor.Loop, sh *Shared) *Loop {
	l := &Loop{r: r, sh: sh, scratch: splice.NewScratch(sh.Pipes)}
	l.queueTimer.OnFire(func(int64) { l.retryQueued() })
	l.interimTimer.OnFire(l.interimDue)
	r.AddPart(l)
	return l
}

// Conns is the number of client connections the relay holds now. Safe
// from any goroutine.
func (l *Loop) Conns() int64 { return l.nconns.Load() }

// AfterTurn moves the turn's byte counts to the shared counters, and
// publishes how many pipes the loop keeps idle (reactor.Part).
func (l *Loop) AfterTurn() {
	sc := l.scratch
	if sc.Pipes != nil {
		sc.Pipes.Publish()
	}
	if sc.Spliced != 0 {
		l.sh.Spliced.Add(sc.Spliced)
		sc.Spliced = 0
	}
	if sc.Copied != 0 {
		l.sh.Copied.Add(sc.Copied)
		sc.Copied = 0
	}
}

// Close closes the listening sockets and resets every connection, as the
// loop stops (reactor.Part).
func (l *Loop) Close() {
	for _, s := range l.lsocks {
		s.close()
	}
	l.held.each(func(c *conn) { c.cut(splice.Aborted) })
	l.AfterTurn()
	l.scratch.Close() // after the cuts, which released their pipes
}

// CutAll resets every connection the loop holds, dialing ones included:
// for a shutdown that ran out of time.
func (l *Loop) CutAll() {
	l.r.Post(func() {
		l.held.each(func(c *conn) { c.cut(splice.Aborted) })
	})
}

// CutBackend resets, on both sides, the relays this loop holds to backend
// b (or to a backend of an earlier configuration that b carries on): an
// operator's drain reached its deadline. Clients still being dialed for
// are left alone; the drain already keeps new ones away.
func (l *Loop) CutBackend(b *pool.Backend) {
	l.r.Post(func() {
		l.held.each(func(c *conn) {
			if c.phase == phaseRelaying && c.backend.Is(b) {
				c.close(CloseDrained, true, true)
			}
		})
	})
}

// conns ranges over the connections the loop holds (for c := range
// l.conns); the body may close the one it is given.
func (l *Loop) conns(yield func(*conn) bool) {
	for c := l.held.head; c != nil; {
		next := c.next
		if !yield(c) {
			return
		}
		c = next
	}
}
