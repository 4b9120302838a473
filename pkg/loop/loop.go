package loop

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxyproto"
	"github.com/l4lb/l4lb/pkg/splice"
)

// owner is what an fd registered in a loop belongs to: one end of a
// connection, or a listening socket.
type owner interface {
	event(ev uint32)
}

// slot maps an fd to its owner. seq tells a registration apart from an
// earlier one of the same fd number: an event still queued for a closed fd
// must not reach the fd's next owner.
type slot struct {
	o   owner
	seq uint32
}

// Loop is one event loop. Its methods other than Post, Start and Wait are
// for its own goroutine only.
type Loop struct {
	id     int
	sh     *Shared
	poll   *poller
	timers timerHeap
	epoch  time.Time
	now    int64 // ns since epoch, read once per wake-up
	// testClock, set before Start, replaces the clock in tests.
	testClock func() int64
	firedAt   int64 // the clock when due timers last fired, microseconds before the loop waits
	// churn: this turn accepted, finished a dial or saw a hang-up, which
	// keeps the next wait from coalescing (coalesce.go).
	churn   bool
	slots   []slot
	seq     uint32
	scratch *splice.Scratch

	// ready holds connections and listeners with work left after their
	// budget; they go on before the loop waits again.
	ready []readier

	lsocks []*lsock
	held   connList // every connection the loop holds

	// waiting are the clients queued for a backend slot (queue.go), and
	// queueTimer their retry; hdr holds a PROXY header being read or
	// written.
	waiting    []*conn
	queueTimer timer
	srcNext    uint32 // turns the pools' source addresses (sockaddr.go)
	hdr        [proxyproto.MaxLength]byte

	// UDP: the loop's socket of each UDP listener, and the batches its
	// datagrams move in (allocated with the first UDP listener).
	udps   []*udpSock
	udpIn  *mmsgBatch
	udpOut *udpOut
	udpRun *[udpBatch]unix.Iovec // one burst GSO-sent on a session's socket (pointing into udpIn)

	nconns atomic.Int64
	stats  loopStats // how it spends its time, for metrics (stats.go)

	stopping bool

	tasksMu sync.Mutex
	tasks   []func()
	closed  bool // under tasksMu: the poller is closed
	done    chan struct{}
}

// readier is something with work left for after the current events.
type readier interface {
	resume()
}

// New creates a loop; nothing runs until Start.
func New(id int, sh *Shared) (*Loop, error) {
	p, err := newPoller()
	if err != nil {
		return nil, fmt.Errorf("loop %d: %w", id, err)
	}
	p.busyPoll, p.coalesce = sh.BusyPoll, sh.WakeCoalesce
	return &Loop{
		id:      id,
		sh:      sh,
		poll:    p,
		epoch:   time.Now(),
		scratch: splice.NewScratch(sh.Pipes),
		done:    make(chan struct{}),
	}, nil
}

// Conns is the number of client connections the loop holds now.
func (l *Loop) Conns() int64 { return l.nconns.Load() }

// Start runs the loop on a goroutine of its own. It is not locked to
// its OS thread: while busy it never leaves it anyway (its raw waits keep
// its P and thread, holdp.go), and when it yields to the garbage collector
// a locked goroutine costs a hand-off between threads. Measured with
// GOGC=1 under 14k connections/s: the collector's mark-termination pause
// 0.19-0.20 ms (median) locked, 0.03 ms not.
func (l *Loop) Start() {
	go func() {
		defer close(l.done)
		l.run()
	}()
}

// Do runs f on the loop's goroutine and waits until it has run; false
// when the loop stopped first (f then never runs).
func (l *Loop) Do(f func()) bool {
	done := make(chan struct{})
	l.Post(func() {
		f()
		close(done)
	})
	select {
	case <-done:
		return true
	case <-l.done:
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// Wait returns once the loop has stopped.
func (l *Loop) Wait() { <-l.done }

// Post runs f on the loop's goroutine soon. Safe from any goroutine; a
// task posted to a loop that has stopped is dropped.
func (l *Loop) Post(f func()) {
	l.tasksMu.Lock()
	defer l.tasksMu.Unlock()
	if l.closed {
		return // the eventfd is closed: its number may belong to another file now
	}
	l.tasks = append(l.tasks, f)
	l.poll.wake()
}

// clock is the loop's time in ns since its epoch (monotonic).
func (l *Loop) clock() int64 {
	if l.testClock != nil {
		return l.testClock()
	}
	return int64(time.Since(l.epoch))
}

// register adds a TCP socket to the epoll set for o.
func (l *Loop) register(fd int, o owner) error { return l.registerEvents(fd, o, socketEvents) }

// registerEvents adds fd to the epoll set for o with the given events.
func (l *Loop) registerEvents(fd int, o owner, events uint32) error {
	for fd >= len(l.slots) {
		l.slots = append(l.slots, make([]slot, max(len(l.slots), 64))...)
	}
	l.seq++
	l.slots[fd] = slot{o: o, seq: l.seq}
	ev := unix.EpollEvent{Events: events, Fd: int32(fd), Pad: int32(l.seq)}
	if err := epollCtl(l.poll.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.slots[fd] = slot{}
		return fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// reown hands a registered fd to a new owner, keeping its registration.
func (l *Loop) reown(fd int, o owner) { l.slots[fd].o = o }

// forget drops fd's owner; call it right before closing fd (closing
// removes it from the epoll set).
func (l *Loop) forget(fd int) {
	if fd >= 0 && fd < len(l.slots) {
		l.slots[fd] = slot{}
	}
}

// markReady queues r to go on after the current events.
func (l *Loop) markReady(r readier) { l.ready = append(l.ready, r) }

func (l *Loop) run() {
	defer l.cleanup()
	l.stats.busySince = l.clock()
	for {
		timeout := -1
		if len(l.ready) > 0 {
			timeout = 0
		} else if at, ok := l.timers.next(); ok {
			timeout = waitTimeout(at - l.firedAt)
		}
		l.beforeWait(timeout != 0)
		evs, err := l.poll.wait(timeout)
		if err != nil {
			l.sh.Log.Error("event loop stopped: epoll failed", "loop", l.id, "error", err)
			return
		}
		l.now = l.clock()
		l.afterWait(timeout != 0, len(evs))
		data := 0
		for i := range evs {
			ev := &evs[i]
			fd := int(ev.Fd)
			if fd == l.poll.wakefd {
				l.poll.drainWake()
				l.runTasks()
				continue
			}
			if fd < len(l.slots) {
				if s := l.slots[fd]; s.o != nil && s.seq == uint32(ev.Pad) {
					data++
					s.o.event(ev.Events)
				}
			}
		}
		// Data on several sockets in one turn arms wake-up coalescing for
		// the next wait; connection churn does not (coalesce.go).
		l.poll.mayCoalesce = data >= 2 && !l.churn
		l.churn = false
		l.runReady()
		l.firedAt = l.clock()
		l.timers.fireDue(l.firedAt)
		l.flushUDP()
		l.flushCounters()
		if l.stopping {
			return
		}
	}
}

func (l *Loop) runTasks() {
	l.tasksMu.Lock()
	tasks := l.tasks
	l.tasks = nil
	l.tasksMu.Unlock()
	for _, f := range tasks {
		f()
	}
}

func (l *Loop) runReady() {
	if len(l.ready) == 0 {
		return
	}
	ready := l.ready
	l.ready = nil
	for _, r := range ready {
		r.resume()
	}
	clear(ready)
	if l.ready == nil {
		l.ready = ready[:0] // keep the backing array
	}
}

// flushCounters moves the wake-up's byte counts to the shared counters,
// and publishes how many pipes the loop keeps idle.
func (l *Loop) flushCounters() {
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
	for _, u := range l.udps {
		u.flushCounters()
	}
}

// cleanup closes what the loop still owns when it stops.
func (l *Loop) cleanup() {
	for _, s := range l.lsocks {
		s.close()
	}
	for _, u := range l.udps {
		u.close()
	}
	l.held.each(func(c *conn) { c.cut(splice.Aborted) })
	l.flushCounters()
	l.scratch.Close() // after the cuts, which released their pipes
	l.tasksMu.Lock()
	l.closed = true
	l.tasks = nil
	l.tasksMu.Unlock()
	l.poll.close()
}

// Stop makes the loop close what it still holds (resetting connections)
// and return; Wait for it.
func (l *Loop) Stop() { l.Post(func() { l.stopping = true }) }

// CutAll resets every connection the loop holds, dialing ones included:
// for a shutdown that ran out of time.
func (l *Loop) CutAll() {
	l.Post(func() {
		l.held.each(func(c *conn) { c.cut(splice.Aborted) })
	})
}

// CutBackend resets, on both sides, the relays this loop holds to backend
// b (or to a backend of an earlier configuration that b carries on): an
// operator's drain reached its deadline. Clients still being dialed for
// are left alone; the drain already keeps new ones away. UDP sessions to
// b end too (moved): their clients' next datagrams are re-picked.
func (l *Loop) CutBackend(b *pool.Backend) {
	l.Post(func() {
		l.held.each(func(c *conn) {
			if c.phase == phaseRelaying && c.backend.Is(b) {
				c.close(CloseDrained, true, true)
			}
		})
		for _, u := range l.udps {
			u.cutBackend(b)
		}
	})
}

// Discard releases a loop that was never started: its listening sockets
// and its poller.
func (l *Loop) Discard() { l.cleanup() }

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
