package loop

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// HandoffSocket is a duplicate of one listening socket a loop serves, made
// for the process that takes the listeners over (a binary upgrade).
type HandoffSocket struct {
	FD   int    // close-on-exec; the caller's to close
	Name string // the listener's
	UDP  bool
}

// errLoopStopped: the loop ended before it ran the task.
var errLoopStopped = errors.New("event loop stopped")

// onLoop runs f on the loop's goroutine and waits for it.
func (l *Loop) onLoop(f func()) error {
	done := make(chan struct{})
	l.Post(func() {
		defer close(done)
		f()
	})
	select {
	case <-done:
		return nil
	case <-l.done:
		select {
		case <-done:
			return nil
		default:
			return errLoopStopped
		}
	}
}

// DupListeners duplicates every listening socket, TCP and UDP, the loop
// still serves. It runs on the loop, which alone closes them, so no
// descriptor is read after being closed (or reused). A running loop only.
func (l *Loop) DupListeners() ([]HandoffSocket, error) {
	var out []HandoffSocket
	var err error
	dup := func(fd int, name string, udp bool) {
		if err != nil {
			return
		}
		var nfd int
		if nfd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			err = fmt.Errorf("loop %d: dup listener %s: %w", l.id, name, err)
			return
		}
		out = append(out, HandoffSocket{FD: nfd, Name: name, UDP: udp})
	}
	if lerr := l.onLoop(func() {
		for _, s := range l.lsocks {
			if !s.closed {
				dup(s.fd, s.f.Name, false)
			}
		}
		for _, u := range l.udps {
			if !u.closed {
				dup(u.fd, u.f.Name, true)
			}
		}
	}); lerr != nil {
		err = lerr
	}
	if err != nil {
		for _, h := range out {
			unix.Close(h.FD)
		}
		return nil, err
	}
	return out, nil
}

// UnwatchListeners takes the loop's listening sockets out of its epoll
// set, on the loop, ahead of CloseListeners. Once another process holds
// the same sockets, closing this process's descriptors no longer removes
// them from the set (epoll forgets a file only when its last descriptor
// closes), and every new client or datagram would wake this loop for
// nothing while it drains.
func (l *Loop) UnwatchListeners() {
	l.Post(func() {
		for _, s := range l.lsocks {
			if !s.closed {
				l.poll.del(s.fd)
				s.unwatched = true
			}
		}
		for _, u := range l.udps {
			if !u.closed {
				l.poll.del(u.fd)
			}
		}
	})
}
