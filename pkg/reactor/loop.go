package reactor

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// Owner is what an fd registered in a loop belongs to: one end of a
// connection, a listening socket, a session's socket. The loop hands it
// each readiness event with one interface call.
type Owner interface {
	Event(ev uint32)
}

// Readier is something with work left for after the current events
// (MarkReady).
type Readier interface {
	Resume()
}

// Part is what runs on a loop beside its fds (the TCP relay, UDP
// sessions): the loop calls AfterTurn at the end of every turn, after the
// timers (flushing batches and counters), and Close once as it stops,
// on its goroutine, in the order the parts were added.
type Part interface {
	AfterTurn()
	Close()
}

// Config is what a loop is made with.
type Config struct {
	ID int
	// BusyPoll is how long a busy loop polls for events before it sleeps
	// (poller.wait); WakeCoalesce how long a loop that handled data on
	// several sockets sleeps on a timer instead (coalesce.go).
	BusyPoll, WakeCoalesce time.Duration
	// Clock is the loop's time source; nil: the real clock. Timers and
	// Now read it as nanoseconds since the loop was made.
	Clock clock.Clock
	Log   *slog.Logger
}

// slot maps an fd to its owner. seq tells a registration apart from an
// earlier one of the same fd number: an event still queued for a closed fd
// must not reach the fd's next owner.
type slot struct {
	o   Owner
	seq uint32
}

// Loop is one event loop. Its methods other than Post, Do, Start, Wait,
// Stop and Stats are for its own goroutine only.
type Loop struct {
	id     int
	log    *slog.Logger
	poll   *poller
	timers timerHeap
	epoch  time.Time
	now    int64 // ns since epoch, read once per wake-up
	// fake is the injected clock when it is not the real one; nil keeps
	// the real clock's fast path (time.Since reads the monotonic clock
	// alone).
	fake    clock.Clock
	firedAt int64 // the clock when due timers last fired
	// yieldedAt: when a holding loop last passed through the scheduler
	// of its own accord (yieldEvery, holdp.go).
	yieldedAt int64
	// churn: this turn accepted, finished a dial or saw a hang-up, which
	// keeps the next wait from coalescing (coalesce.go).
	churn bool
	slots []slot
	seq   uint32

	// ready holds owners with work left after their budget; they go on
	// before the loop waits again.
	ready []Readier
	parts []Part

	stats loopStats // how it spends its time, for metrics (stats.go)

	stopping bool

	tasksMu sync.Mutex
	tasks   []func()
	closed  bool // under tasksMu: the poller is closed
	done    chan struct{}
}

// New creates a loop; nothing runs until Start.
func New(cfg Config) (*Loop, error) {
	p, err := newPoller()
	if err != nil {
		return nil, fmt.Errorf("loop %d: %w", cfg.ID, err)
	}
	p.busyPoll, p.coalesce = cfg.BusyPoll, cfg.WakeCoalesce
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := clock.Or(cfg.Clock)
	l := &Loop{id: cfg.ID, log: log, poll: p, epoch: c.Now(), done: make(chan struct{})}
	if _, real := c.(clock.Real); !real {
		l.fake = c
	}
	return l, nil
}

// ID is the loop's number, from 0.
func (l *Loop) ID() int { return l.id }

// AddPart adds p to what the loop runs; before Start.
func (l *Loop) AddPart(p Part) { l.parts = append(l.parts, p) }

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

// Now is the loop's time when the current turn began, or, in a timer's
// callback, when the turn's timers fired (ns since its epoch): what
// timers of the turn's work are armed from.
func (l *Loop) Now() int64 { return l.now }

// timeOf is the time at ns on the loop's clock, for the poller, which
// keeps the real clock's times: with an injected clock, the real time
// now.
func (l *Loop) timeOf(ns int64) time.Time {
	if l.fake != nil {
		return time.Now()
	}
	return l.epoch.Add(time.Duration(ns))
}

// Clock reads the loop's clock now, in ns since its epoch (monotonic).
func (l *Loop) Clock() int64 {
	if l.fake != nil {
		return int64(l.fake.Now().Sub(l.epoch))
	}
	return int64(time.Since(l.epoch))
}

// Churn marks the turn as one that accepted, finished a dial or saw a
// hang-up: the next wait does not coalesce (coalesce.go).
func (l *Loop) Churn() { l.churn = true }

// Register adds fd to the epoll set for o with the given events
// (SocketEvents, DatagramEvents).
func (l *Loop) Register(fd int, o Owner, events uint32) error {
	for fd >= len(l.slots) {
		l.slots = append(l.slots, make([]slot, max(len(l.slots), 64))...)
	}
	l.seq++
	l.slots[fd] = slot{o: o, seq: l.seq}
	ev := unix.EpollEvent{Events: events, Fd: int32(fd), Pad: int32(l.seq)}
	if err := rawsys.EpollCtl(l.poll.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.slots[fd] = slot{}
		return fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// WatchWrites adds writing to the events of fd, registered with
// ReadSocketEvents, once its owner found it full. epoll_ctl(MOD) looks at
// the socket's readiness as it is now, so space freed between the EAGAIN
// and this call still raises the event.
func (l *Loop) WatchWrites(fd int) error {
	ev := unix.EpollEvent{Events: SocketEvents, Fd: int32(fd), Pad: int32(l.slots[fd].seq)}
	if err := rawsys.EpollCtl(l.poll.epfd, unix.EPOLL_CTL_MOD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl mod fd %d: %w", fd, err)
	}
	return nil
}

// Reown hands a registered fd to a new owner, keeping its registration.
func (l *Loop) Reown(fd int, o Owner) { l.slots[fd].o = o }

// Forget drops fd's owner; call it right before closing fd (closing
// removes it from the epoll set).
func (l *Loop) Forget(fd int) {
	if fd >= 0 && fd < len(l.slots) {
		l.slots[fd] = slot{}
	}
}

// Unwatch takes fd out of the epoll set while it stays open (a listening
// socket another process holds too: closing this process's descriptor
// would not remove it).
func (l *Loop) Unwatch(fd int) { l.poll.del(fd) }

// MarkReady queues r to go on after the current events.
func (l *Loop) MarkReady(r Readier) { l.ready = append(l.ready, r) }

func (l *Loop) run() {
	defer l.cleanup()
	l.firedAt = l.Clock()
	l.stats.busySince = l.firedAt
	for {
		// A wait that may sleep goes by one reading of the clock, taken
		// here, after the turn's timers and parts: its deadline, the busy
		// polling and hold-idle clocks, and the end of the turn's busy
		// stretch all use it, since a clock read costs about a syscall's
		// entry on a VM. A poll (work is ready) needs none.
		timeout, at := 0, l.firedAt
		if len(l.ready) == 0 {
			at = l.Clock()
			timeout = l.waitTimeout(at)
		}
		block := timeout != 0
		l.beforeWait(block, at)
		if l.yieldIfDue() && block {
			// Other goroutines may have run meanwhile: time went on, and
			// a timer may be due (the wait then only polls).
			at = l.Clock()
			timeout = l.waitTimeout(at)
		}
		evs, err := l.poll.wait(timeout, l.timeOf(at))
		if err != nil {
			l.log.Error("event loop stopped: epoll failed", "loop", l.id, "error", err)
			return
		}
		l.now = l.Clock()
		l.afterWait(block, len(evs))
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
					s.o.Event(ev.Events)
				}
			}
		}
		// Data on several sockets in one turn arms wake-up coalescing for
		// the next wait; connection churn does not (coalesce.go).
		l.poll.mayCoalesce = data >= 2 && !l.churn
		l.churn = false
		l.runReady()
		// Timers fire at a fresh reading, and Now follows it, so that what
		// their callbacks stamp (an ended session's record, a timer armed
		// again) agrees with the now they were given, and a timer the
		// turn's work armed for now (a slot freed: the queue's retry)
		// fires in this turn.
		l.firedAt = l.Clock()
		l.now = l.firedAt
		l.timers.fireDue(l.firedAt)
		for _, p := range l.parts {
			p.AfterTurn()
		}
		if l.stopping {
			return
		}
	}
}

// waitTimeout is the wait's timeout at at on the loop's clock: until the
// next timer is due (0 if it is), or none (-1).
func (l *Loop) waitTimeout(at int64) int {
	if next, ok := l.timers.next(); ok {
		return rawsys.WaitTimeout(next - at)
	}
	return -1
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
		r.Resume()
	}
	clear(ready)
	if l.ready == nil {
		l.ready = ready[:0] // keep the backing array
	}
}

// cleanup closes the parts, then the task queue and the poller.
func (l *Loop) cleanup() {
	for _, p := range l.parts {
		p.Close()
	}
	l.tasksMu.Lock()
	l.closed = true
	l.tasks = nil
	l.tasksMu.Unlock()
	l.poll.close()
}

// Stop makes the loop close its parts (resetting connections) and
// return; Wait for it.
func (l *Loop) Stop() { l.Post(func() { l.stopping = true }) }

// Discard releases a loop that was never started: its parts and its
// poller.
func (l *Loop) Discard() { l.cleanup() }
