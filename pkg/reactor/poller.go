package reactor

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/rawsys"
)

// poller is one epoll set plus an eventfd that wakes it from other
// goroutines. Every connected socket is added once, edge-triggered, and
// its readiness is remembered by its owner (a listening socket is the
// exception: ListenEvents): a socket is watched for what it
// may wait for (reading and hang-ups always; writing from the start, or,
// for a client, only from its first full send buffer, Loop.WatchWrites),
// so interest changes at most once in a socket's life.
type poller struct {
	epfd   int
	wakefd int
	events []unix.EpollEvent
	// holding: this loop holds a P across its waits (holdp.go), and
	// idleSince is when it last ran out of events (zero while it has
	// some): holding ends holdIdle after that.
	holding   bool
	idleSince time.Time
	// busyPoll: how long a held wait polls before it sleeps.
	busyPoll time.Duration
	// coalesce: how long a held wait sleeps on a timer, when the loop's
	// last turn armed it (mayCoalesce), before it takes the events that
	// arrived meanwhile (coalesce.go); gathers counts those sleeps.
	coalesce    time.Duration
	mayCoalesce bool
	gathers     int
	// sleeps counts the blocking waits, which sleep in the kernel unless
	// an event is already there (tests read it).
	sleeps int
	// waits counts blocking waits made holding the P, to check now and
	// then that the P may still be held (overHeld).
	waits uint32
	// turns counts every wait: one per turn of the loop (Loop.Turn).
	turns uint64
}

// SocketEvents are the event bits a TCP socket is registered with
// (EPOLLPRI: TCP urgent data, which splice cannot read past; see
// splice.Stream.Urgent).
const SocketEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLPRI | unix.EPOLLET

// ReadSocketEvents are SocketEvents without writing: for a TCP socket
// that is written to only once something arrives for it (a client), whose
// owner takes it as writable until a write says EAGAIN and only then asks
// for EPOLLOUT (Loop.WatchWrites). Registered for writing from the start,
// such a socket wakes the loop each time its peer's ACKs free send-buffer
// space, which a request-response connection never needs to know: in the
// sni bench that was one wake-up in three of a client's.
const ReadSocketEvents = SocketEvents &^ unix.EPOLLOUT

// ListenEvents: a listening socket is level-triggered, reading only
// (writing, hang-ups and urgent data mean nothing on it), so its owner
// may accept fewer than the queue holds and stop without the accept that
// says EAGAIN: epoll reports the socket again at the next wait while
// clients are queued.
const ListenEvents = unix.EPOLLIN

// DatagramEvents: a UDP socket is watched for reading only (errors are
// always reported). Asking for EPOLLOUT too would wake the loop after
// every datagram sent, as each one frees send-buffer space.
const DatagramEvents = unix.EPOLLIN | unix.EPOLLET

// maxEvents is how many events one epoll_wait returns at most: the
// fairness budget between polling and working (HAProxy's maxpollevents).
const maxEvents = 256

func newPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	p := &poller{epfd: epfd, wakefd: wakefd, events: make([]unix.EpollEvent, maxEvents)}
	if err := p.add(wakefd, unix.EPOLLIN|unix.EPOLLET); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *poller) add(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := rawsys.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// del removes fd. Closing an fd removes it too, unless it was duplicated;
// del is for listening sockets another process holds too (Loop.Unwatch).
func (p *poller) del(fd int) {
	rawsys.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

// wait blocks until events arrive or timeoutMs runs out (-1: no timeout,
// 0: poll). While the loop is busy it waits holding its P (holdp.go);
// once it has seen no event for holdIdle it gives the P back and waits
// through the runtime's syscall hand-off, which lets the P serve other
// goroutines meanwhile.
func (p *poller) wait(timeoutMs int, now time.Time) ([]unix.EpollEvent, error) {
	p.turns++
	if timeoutMs == 0 { // a poll never blocks, so it needs no hand-off either
		return p.result(rawsys.EpollPoll(p.epfd, p.events))
	}
	if !p.holding {
		return p.runtimeWait(timeoutMs)
	}
	// Both limits are kept as times, not as the length of the next raw
	// wait: the runtime interrupts raw waits (each garbage collection
	// signals a few times), and a wait that restarted in full after each
	// interruption could run late without bound. now is the caller's
	// reading of the clock, taken right before the call.
	var deadline time.Time
	if timeoutMs > 0 {
		deadline = now.Add(time.Duration(timeoutMs) * time.Millisecond)
	}
	switch {
	case p.busyPoll > 0:
		if n := p.spin(now, deadline); n > 0 {
			p.idleSince = time.Time{}
			return p.events[:n], nil
		}
		now = time.Now()
	case p.coalesce > 0 && p.mayCoalesce:
		p.mayCoalesce = false // the turn that handles what this brings may arm it again
		if n := p.gather(now, deadline); n > 0 {
			p.idleSince = time.Time{}
			return p.events[:n], nil
		}
		now = time.Now()
	}
	if p.idleSince.IsZero() {
		p.idleSince = now
	}
	yielded := false // to the runtime, which may have lowered GOMAXPROCS meanwhile
	for {
		if !deadline.IsZero() && !now.Before(deadline) {
			return p.events[:0], nil // a timer is due
		}
		idleLeft := holdIdle - now.Sub(p.idleSince)
		p.waits++
		if idleLeft <= 0 || (yielded || p.waits%overHeldEvery == 0) && overHeld() {
			p.release()
			return p.runtimeWait(msUntil(deadline, now))
		}
		raw := ceilMs(idleLeft)
		if !deadline.IsZero() {
			raw = min(raw, ceilMs(deadline.Sub(now)))
		}
		p.sleeps++
		n, err := rawsys.EpollWait(p.epfd, p.events, raw)
		switch {
		case err == unix.EINTR:
			// Most likely the runtime asking this goroutine to stop (a
			// garbage collection, or sysmon's time slice): let it.
			yield()
		case err != nil:
			return p.result(n, err)
		case n > 0:
			p.idleSince = time.Time{}
			return p.events[:n], nil
		}
		yielded = err == unix.EINTR
		now = time.Now()
	}
}

// runtimeWait is a blocking wait made the runtime's way (the P is handed
// on while the thread sleeps); its first event makes the loop busy again
// and take a P token if one is spare. It is not a raw call, so not
// rawsys's: an interrupted wait is made again, and each try counts as a
// sleep.
func (p *poller) runtimeWait(timeoutMs int) ([]unix.EpollEvent, error) {
	for {
		p.sleeps++
		n, err := unix.EpollWait(p.epfd, p.events, timeoutMs)
		if err == unix.EINTR {
			continue
		}
		if n > 0 {
			p.holding = acquireHold()
			p.idleSince = time.Time{}
		}
		return p.result(n, err)
	}
}

func (p *poller) result(n int, err error) ([]unix.EpollEvent, error) {
	if err != nil {
		return nil, fmt.Errorf("epoll_wait: %w", err)
	}
	return p.events[:n], nil
}

// spin polls for events until busyPoll ([global] busy_poll) has passed
// since now, or the deadline (if set) is reached, and returns how many it
// found. A busy loop that sleeps as soon as it is idle makes whoever
// sends its next packet wake its core, which on some hosts (VMs without
// halt-polling) costs the sender more than the spin costs the loop.
func (p *poller) spin(now, deadline time.Time) int {
	end := now.Add(p.busyPoll)
	if !deadline.IsZero() && deadline.Before(end) {
		end = deadline
	}
	for {
		n, err := rawsys.EpollWait(p.epfd, p.events, 0)
		if err == nil && n > 0 {
			return n
		}
		if !time.Now().Before(end) {
			return 0
		}
	}
}

// Turn is the number of the loop's current turn, from 1 (one per wait):
// an owner tells from it whether it was reported in the turn before too.
func (l *Loop) Turn() uint64 { return l.poll.turns }

// ceilMs is d in whole milliseconds, rounded up (epoll_wait's unit).
func ceilMs(d time.Duration) int {
	return int((d + time.Millisecond - 1) / time.Millisecond)
}

// msUntil is the timeout that ends at deadline (-1 for none; 0 when it
// has passed).
func msUntil(deadline, now time.Time) int {
	if deadline.IsZero() {
		return -1
	}
	return max(0, ceilMs(deadline.Sub(now)))
}

// release gives back the loop's P token, if it holds one.
func (p *poller) release() {
	if p.holding {
		p.holding = false
		releaseHold()
	}
}

// wake makes a blocked wait return. Safe from any goroutine.
func (p *poller) wake() {
	one := [8]byte{1}
	unix.Write(p.wakefd, one[:]) // EAGAIN: already pending, which is enough
}

// drainWake consumes pending wake-ups.
func (p *poller) drainWake() {
	var buf [8]byte
	unix.Read(p.wakefd, buf[:])
}

func (p *poller) close() {
	p.release()
	unix.Close(p.wakefd)
	unix.Close(p.epfd)
}
