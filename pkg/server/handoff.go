package server

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/listener"
)

// Inherited sockets (Frontend.FDs) and the hand-over of a serving
// Server's sockets to the process replacing it (a binary upgrade).
//
// A listener served from inherited sockets keeps every one of them, never
// closing one while it serves: each SO_REUSEPORT socket has an accept
// queue of its own, and closing it resets the clients queued there. With
// K sockets and N loops, socket i goes to loop i mod N, so when K > N a
// loop serves several sockets of one listener. When K < N, a TCP
// listener's sockets are shared: loop j >= K registers a duplicate of
// socket j mod K, and the kernel wakes every loop watching a socket, one
// of which accepts the client. A UDP listener's loops past K get no
// socket of it: the kernel would hand a client's datagrams to whichever
// loop read first, splitting its session across loops.

// tcpSockets opens fc's sockets: its inherited ones adopted, else one new
// socket per loop, beside own (sockets this process holds and is about to
// close: see listener.Own).
func tcpSockets(fc Frontend, loops int, own listener.Own) (*listener.Sockets, error) {
	if len(fc.FDs) > 0 {
		return listener.Adopt(fc.Name, fc.FDs, fc.Backlog)
	}
	return listener.BindOwn(fc.Name, fc.Bind, fc.Backlog, loops, own)
}

// udpSockets is tcpSockets for a UDP listener.
func udpSockets(fc Frontend, loops int, own listener.Own) (*listener.UDPSockets, error) {
	if len(fc.FDs) > 0 {
		return listener.AdoptUDP(fc.Name, fc.FDs)
	}
	return listener.BindUDPOwn(fc.Name, fc.Bind, loops, own)
}

// spread hands fds to the loops with add, as described above (share: a
// TCP listener's, whose loops past len(fds) get duplicates). Each fd
// taken is set to -1 in fds; on an error the ones left are the caller's.
func (s *Server) spread(fds []int, share bool, add func(l *cpuLoop, fd int) error) error {
	n, k := len(s.loops), len(fds)
	var dups []int // for loops k..n-1, made before any fd is handed over
	closeDups := func() {
		for _, d := range dups {
			if d >= 0 {
				unix.Close(d)
			}
		}
	}
	for j := k; share && j < n; j++ {
		d, err := unix.FcntlInt(uintptr(fds[j%k]), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeDups()
			return fmt.Errorf("share a listening socket with loop %d: %w", j, err)
		}
		dups = append(dups, d)
	}
	for i, fd := range fds {
		if err := add(s.loops[i%n], fd); err != nil {
			closeDups()
			return err
		}
		fds[i] = -1 // the loop owns it now
	}
	for j, d := range dups {
		if err := add(s.loops[k+j], d); err != nil {
			closeDups()
			return err
		}
		dups[j] = -1
	}
	return nil
}

// HandoffSocket is a duplicate of one listening socket the server serves,
// made for the process that takes the listeners over (a binary upgrade).
type HandoffSocket struct {
	FD   int    // close-on-exec; the caller's to close
	Name string // the listener's
	UDP  bool
}

// errLoopStopped: the loop ended before it ran the task.
var errLoopStopped = errors.New("event loop stopped")

// HandoffSockets duplicates every listening socket the server serves, TCP
// and UDP, once per socket (the duplicates several loops share count
// once), for the process that takes them over. The caller closes the
// fds. The loops must be running.
func (s *Server) HandoffSockets() ([]HandoffSocket, error) {
	s.reloadMu.Lock() // the listener set stays as it is meanwhile
	defer s.reloadMu.Unlock()
	var out []HandoffSocket
	seen := map[uint64]bool{}
	fail := func(err error) ([]HandoffSocket, error) {
		for _, h := range out {
			unix.Close(h.FD)
		}
		return nil, err
	}
	for _, l := range s.loops {
		socks, err := l.dupListeners()
		if err != nil {
			return fail(err)
		}
		for i, h := range socks {
			id, err := listener.SocketID(h.FD)
			if err != nil || seen[id] {
				unix.Close(h.FD)
				if err != nil {
					for _, rest := range socks[i+1:] {
						unix.Close(rest.FD)
					}
					return fail(fmt.Errorf("listener %s: fstat: %w", h.Name, err))
				}
				continue
			}
			seen[id] = true
			out = append(out, h)
		}
	}
	return out, nil
}

// dupListeners duplicates every listening socket, TCP and UDP, the loop
// still serves. It runs on the loop, which alone closes them, so no
// descriptor is read after being closed (or reused). A running loop only.
func (l *cpuLoop) dupListeners() ([]HandoffSocket, error) {
	var out []HandoffSocket
	var err error
	dup := func(udp bool) func(fd int, name string) {
		return func(fd int, name string) {
			if err != nil {
				return
			}
			var nfd int
			if nfd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
				err = fmt.Errorf("loop %d: dup listener %s: %w", l.ID(), name, err)
				return
			}
			out = append(out, HandoffSocket{FD: nfd, Name: name, UDP: udp})
		}
	}
	if !l.Do(func() {
		l.tcp.EachListener(dup(false))
		l.udp.EachListener(dup(true))
	}) {
		err = errLoopStopped
	}
	if err != nil {
		for _, h := range out {
			unix.Close(h.FD)
		}
		return nil, err
	}
	return out, nil
}

// Unwatch takes the listening sockets out of the loops' epoll sets once
// another process serves them (relay.Loop.UnwatchListeners); Shutdown then
// closes this process's descriptors of them and drains.
func (s *Server) Unwatch() {
	for _, l := range s.loops {
		l.tcp.UnwatchListeners()
		l.udp.UnwatchListeners()
	}
}
