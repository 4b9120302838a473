package loop

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// poller is one epoll set plus an eventfd that wakes it from other
// goroutines. Every socket is added once, edge-triggered, for reading and
// writing and hang-ups: readiness is remembered by its owner, so no
// epoll_ctl is ever needed to change interest.
type poller struct {
	epfd   int
	wakefd int
	events []unix.EpollEvent
	// holding: this loop holds a P across its waits (holdp.go).
	holding bool
	// busyPoll: how long a held wait polls before it sleeps.
	busyPoll time.Duration
	// sleeps counts the waits made with a timeout, which sleep in the
	// kernel unless an event is already there (tests read it).
	sleeps int
	// waits counts held waits, to check now and then that the P may
	// still be held (overHeld).
	waits uint32
}

// Event bits a socket is registered with (EPOLLPRI: TCP urgent data, which
// splice cannot read past; see splice.Stream.Urgent).
const socketEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLPRI | unix.EPOLLET

// datagramEvents: a UDP socket is watched for reading only (errors are
// always reported). Asking for EPOLLOUT too would wake the loop after
// every datagram sent, as each one frees send-buffer space.
const datagramEvents = unix.EPOLLIN | unix.EPOLLET

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
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// del removes fd. Closing an fd removes it too, unless it was duplicated;
// del is for sockets handed to someone else (none today) and listeners.
func (p *poller) del(fd int) {
	unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

// wait blocks until events arrive or timeoutMs runs out (-1: no timeout,
// 0: poll). While the loop is busy it waits holding its P (holdp.go);
// after holdIdleMs without an event it waits through the runtime's
// syscall hand-off, which lets the P serve other goroutines meanwhile.
func (p *poller) wait(timeoutMs int) ([]unix.EpollEvent, error) {
	for {
		if !p.holding && timeoutMs != 0 {
			p.sleeps++
			n, err := unix.EpollWait(p.epfd, p.events, timeoutMs)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("epoll_wait: %w", err)
			}
			if n > 0 {
				p.holding = acquireHold()
			}
			return p.events[:n], nil
		}
		if timeoutMs != 0 && p.busyPoll > 0 {
			if n := p.spin(); n > 0 {
				return p.events[:n], nil
			}
		}
		// A poll (timeout 0) never blocks, so it needs no hand-off either.
		raw := timeoutMs
		if timeoutMs != 0 && (timeoutMs < 0 || timeoutMs > holdIdleMs) {
			raw = holdIdleMs
		}
		if raw != 0 {
			p.sleeps++
		}
		if p.waits++; p.waits%overHeldEvery == 0 && overHeld() {
			p.release() // after this wait, which is short or has events
		}
		n, err := rawEpollWait(p.epfd, p.events, raw)
		if err == unix.EINTR {
			// Most likely the runtime asking this goroutine to stop (a
			// garbage collection, or sysmon's time slice): let it.
			runtime.Gosched()
			if overHeld() {
				p.release()
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("epoll_wait: %w", err)
		}
		if n == 0 && raw != timeoutMs {
			// Idle for holdIdleMs: give the P back and wait the rest
			// the runtime's way.
			p.release()
			if timeoutMs > 0 {
				timeoutMs -= raw
			}
			continue
		}
		return p.events[:n], nil
	}
}

// spin polls for events for up to busyPoll ([global] busy_poll) and
// returns how many it found. A busy loop that sleeps as soon as it is
// idle makes whoever sends its next packet wake its core, which on some
// hosts (VMs without halt-polling) costs the sender more than the spin
// costs the loop.
func (p *poller) spin() int {
	end := time.Now().Add(p.busyPoll)
	for {
		n, err := rawEpollWait(p.epfd, p.events, 0)
		if err == nil && n > 0 {
			return n
		}
		if !time.Now().Before(end) {
			return 0
		}
	}
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
