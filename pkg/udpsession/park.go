package udpsession

import (
	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// Parking (reuse_sockets = true): a session that ended cleanly leaves its
// backend socket, still connected and registered, for the next session to
// the same backend. A DNS-like listener (responses = 1) would otherwise
// pay socket, connect, epoll_ctl and close for every request; parked, a
// request costs its send and its reply.
//
// A socket is parked only when nothing more should come on it: its
// session sent one datagram and received exactly the `responses` the
// listener says that datagram gets. A datagram or an error arriving while
// it is parked means the backend sent something no one asked for: the
// socket is closed, never handed on; and before a parked socket is handed
// on, a receive that must find nothing makes sure no reply waits in it.
// What no check can catch is an extra reply the backend sends after the
// socket was handed on: it reaches the next client. That is why parking is
// the operator's choice, for backends that answer each request with
// exactly `responses` datagrams (DNS servers do), and off by default.

// parkMax bounds the sockets parked per backend per loop: enough for the
// requests in flight at once; beyond it sockets are closed.
const parkMax = 64

// A socket parked longer than the listener's session_timeout is closed:
// source ports are not held for nothing.

// parkedSock is a backend socket waiting for its next session.
type parkedSock struct {
	u       *udpSock
	fd      int // -1 once closed
	at      int64
	drops   dropCount // the socket's drop count as its last session saw it
	watched bool
}

// event: something arrived on a parked socket that nothing asked for. It
// closes the socket: churn, not traffic (pkg/reactor, coalesce.go).
func (p *parkedSock) Event(uint32) {
	p.u.l.r.Churn()
	p.close()
}

func (p *parkedSock) close() {
	if p.fd < 0 {
		return
	}
	p.u.l.r.Forget(p.fd)
	unix.Close(p.fd)
	p.fd = -1
	p.u.f.sockets.Add(-1)
	p.u.f.Parked.Add(-1)
	p.u.nparked--
}

// parkable reports whether s, ending for why, may leave its socket parked.
func (s *session) parkable(why SessionEnd) bool {
	u := s.u
	return why == EndResponses && u.f.Settings().ReuseSockets && s.requests == 1 && !s.excess && s.dial == nil && s.own == nil && s.fd >= 0 &&
		!s.forced && s.backend.Usable() && len(u.parked[s.backend]) < parkMax // none picks an unusable one
}

// park keeps s's socket for the next session to its backend.
func (s *session) park() {
	u := s.u
	p := &parkedSock{u: u, fd: s.fd, at: u.l.r.Now(), drops: s.drops, watched: s.watched}
	u.l.r.Reown(s.fd, p)
	u.parked[s.backend] = append(u.parked[s.backend], p)
	u.nparked++
	u.f.Parked.Add(1)
	s.fd = -1
	s.pool.EndRelay(s.backend)
	u.armExpiry(p.at + int64(u.f.Settings().SessionTimeout))
}

// unpark hands the most recently parked socket to backend b to s, or
// returns -1. The caller holds a socket reservation; a parked socket is
// already counted, so the reservation is given back. Sockets are kept by
// backend, not by its place in the pool, so a reload that reorders the
// pool never hands out a socket connected elsewhere.
func (u *udpSock) unpark(b *pool.Backend, s *session) int {
	stack := u.parked[b]
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack[len(stack)-1] = nil
		stack = stack[:len(stack)-1]
		u.parked[b] = stack
		if p.fd < 0 {
			continue // closed while parked
		}
		if !quiet(p.fd) {
			p.close()
			continue
		}
		fd := p.fd
		p.fd = -1
		u.nparked--
		u.f.Parked.Add(-1)
		u.f.sockets.Add(-1) // the reservation: this socket was counted already
		u.l.r.Reown(fd, s)
		s.drops, s.watched = p.drops, p.watched
		return fd
	}
	return -1
}

// quiet reports whether nothing waits to be read on a parked socket: no
// datagram and no error (a refusal reported since it was parked).
func quiet(fd int) bool {
	var b [1]byte
	_, err := rawsys.Recv(fd, b[:], unix.MSG_DONTWAIT|unix.MSG_PEEK)
	return err == unix.EAGAIN
}

// sweepParked closes sockets parked for longer than session_timeout and
// returns when the next one would be due (0: none parked).
func (u *udpSock) sweepParked(now int64) (next int64) {
	ttl := int64(u.f.Settings().SessionTimeout)
	for b, stack := range u.parked {
		// The stack is in parking order: the oldest at the bottom.
		k := 0
		for k < len(stack) && (stack[k].fd < 0 || stack[k].at+ttl <= now) {
			stack[k].close()
			k++
		}
		if k > 0 {
			n := copy(stack, stack[k:])
			clear(stack[n:])
			stack = stack[:n]
			u.parked[b] = stack
		}
		if len(stack) == 0 {
			delete(u.parked, b) // a backend gone by a reload leaves no entry
			continue
		}
		if due := stack[0].at + ttl; next == 0 || due < next {
			next = due
		}
	}
	return next
}

// dropOldestParked closes one parked socket (the oldest of some backend
// that has one), to make room at max_sessions; false: none.
func (u *udpSock) dropOldestParked() bool {
	for b, stack := range u.parked {
		for len(stack) > 0 {
			p := stack[0]
			n := copy(stack, stack[1:])
			stack[n] = nil
			stack = stack[:n]
			u.parked[b] = stack
			if p.fd >= 0 {
				p.close()
				return true
			}
		}
	}
	return false
}

// closeParked closes every parked socket (shutdown).
func (u *udpSock) closeParked() {
	for b, stack := range u.parked {
		for _, p := range stack {
			p.close()
		}
		delete(u.parked, b)
	}
}
