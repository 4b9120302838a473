package udpsession

import (
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/loopguard"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// Loop is the UDP side of one event loop: its socket of each UDP listener
// with their sessions, and the batches datagrams move in. Its methods
// other than CloseListeners, CutBackend, UnwatchListeners and Serves are
// for the loop's goroutine only.
type Loop struct {
	r     *reactor.Loop
	guard *loopguard.Guard

	udps []*udpSock
	// served are the identities of the listener sockets open on the loop,
	// for Serves (handover.go), replaced whole as they change.
	served atomic.Pointer[[]uint64]
	// The batches, allocated with the first UDP listener: client datagrams
	// in, replies out, and one burst GSO-sent on a session's socket
	// (pointing into udpIn).
	udpIn  *mmsgBatch
	udpOut *udpOut
	udpRun *[udpBatch]unix.Iovec

	// access is where the access log is found (access.go): nil, or a
	// queue nil, while off; interim are the sessions due interim records,
	// interimTimer the next look at them.
	access       *accesslog.Sink
	interim      accesslog.Schedule[*session]
	interimTimer reactor.Timer

	// beforeFirstSend, when set, runs between a new session's dial and its
	// first send: tests make a refusal land there (as one can between
	// unpark's check and the send), a window no socket can be aimed at.
	beforeFirstSend func(s *session)
}

// New adds UDP sessions to loop r; guard is the server's loop detection,
// shared with its TCP relay. Before r starts.
func New(r *reactor.Loop, guard *loopguard.Guard) *Loop {
	l := &Loop{r: r, guard: guard}
	l.interimTimer.OnFire(l.interimDue)
	r.AddPart(l)
	return l
}

// AfterTurn sends the turn's replies and moves its counts to the
// listeners' counters (reactor.Part).
func (l *Loop) AfterTurn() {
	l.flushUDP()
	for _, u := range l.udps {
		u.flushCounters()
	}
}

// Close closes every socket with its sessions, as the loop stops
// (reactor.Part).
func (l *Loop) Close() {
	for _, u := range l.udps {
		u.close()
	}
}

// CloseListeners closes the sockets with their sessions (a drain): a
// datagram client has no connection to finish, and its retries find the
// next l4lb.
func (l *Loop) CloseListeners() { l.r.Post(l.Close) }

// CutBackend ends the sessions to backend b (an operator's drain reached
// its deadline): their clients' next datagrams are re-picked.
func (l *Loop) CutBackend(b *pool.Backend) {
	l.r.Post(func() {
		for _, u := range l.udps {
			u.cutBackend(b)
		}
	})
}

// EachListener calls fn with each listener socket still open and its
// listener's name, for a binary upgrade's hand-over. On the loop (Do).
func (l *Loop) EachListener(fn func(fd int, name string)) {
	for _, u := range l.udps {
		if !u.closed {
			fn(u.fd, u.f.Name)
		}
	}
}

// UnwatchListeners takes the listener sockets out of the loop's epoll set
// once another process holds them too (see relay.Loop.UnwatchListeners).
func (l *Loop) UnwatchListeners() {
	l.r.Post(func() {
		for _, u := range l.udps {
			if !u.closed {
				l.r.Unwatch(u.fd)
			}
		}
	})
}
