package relay

import (
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/reactor"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// lsock is a loop's own listening socket of one listener (SO_REUSEPORT:
// the kernel spreads new connections over the loops' sockets). It is
// level-triggered (reactor.ListenEvents): a turn may leave clients queued,
// and epoll reports the socket again at the next wait.
type lsock struct {
	l      *Loop
	fd     int
	f      *Front
	closed bool
	// unwatched: out of the epoll set because another process holds
	// the socket too (an upgrade); closing this descriptor resets nothing.
	unwatched bool

	// burst is how many clients the socket's last turn could accept, and
	// growAt the turn in which it doubles (acceptAll).
	burst  int
	growAt uint64

	// Back-off after accept failed for want of resources (EMFILE...): the
	// queue is left alone for a while instead of spinning on it, the
	// socket out of the epoll set (resting) until the retry fires.
	backoff  time.Duration
	failures int
	retry    reactor.Timer
	resting  bool

	// accept is accept4; tests put errors in its way.
	accept func(fd int) (int, netip.AddrPort, error)
}

// acceptBatch bounds accepts per turn (the burst grows up to it) so a
// connection storm on one listener does not starve the loop's
// established connections.
const acceptBatch = 64

const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// AddListener hands the loop its socket of listener f. It must be called
// before Start.
func (l *Loop) AddListener(fd int, f *Front) error {
	s := &lsock{l: l, fd: fd, f: f, accept: rawsys.Accept4}
	s.retry.OnFire(func(int64) { s.backoffOver() })
	if err := l.r.Register(fd, s, reactor.ListenEvents); err != nil {
		return err
	}
	l.lsocks = append(l.lsocks, s)
	return nil
}

// DetachListener closes the loop's sockets of listener f (a reload that
// removed it); its connections go on. Call it on the loop (Do).
func (l *Loop) DetachListener(f *Front) {
	kept := l.lsocks[:0]
	for _, s := range l.lsocks {
		if s.f == f {
			s.acceptQueued()
			s.close()
			continue
		}
		kept = append(kept, s)
	}
	clear(l.lsocks[len(kept):])
	l.lsocks = kept
}

// ListenerKeepalive sets client-side keepalive on the loop's sockets of
// listener f (a reload): connections accepted from then on inherit it.
// Turning it off clears SO_KEEPALIVE. Call it on the loop (Do).
func (l *Loop) ListenerKeepalive(f *Front, ka sockopt.Keepalive) error {
	for _, s := range l.lsocks {
		if s.f != f {
			continue
		}
		if !ka.On() {
			if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 0); err != nil {
				return err
			}
			continue
		}
		if err := ka.Apply(s.fd); err != nil {
			return err
		}
	}
	return nil
}

// RenameListener makes the loop's sockets of listener old accept for f
// (a reload that renamed the listener on the same address). Call it on
// the loop (Do).
func (l *Loop) RenameListener(old, f *Front) {
	for _, s := range l.lsocks {
		if s.f == old {
			s.f = f
		}
	}
}

// CloseListeners stops accepting (a drain); connections go on.
func (l *Loop) CloseListeners() {
	l.r.Post(func() {
		for _, s := range l.lsocks {
			s.acceptQueued()
			s.close()
		}
	})
}

func (s *lsock) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.l.r.Disarm(&s.retry)
	s.l.r.Forget(s.fd)
	unix.Close(s.fd)
}

func (s *lsock) Event(uint32) {
	s.l.r.Churn()
	if !s.retry.Armed() { // backing off (reported before it left the set): the retry timer will accept
		s.acceptAll()
	}
}

// acceptAll accepts for one report of the socket, a burst of clients: one
// at first, as nginx does by default (multi_accept off), so that one
// client at a time costs one accept4 and not a second that says EAGAIN;
// doubled, up to acceptBatch (HAProxy bounds a wake's accepts likewise,
// tune.maxaccept), in a turn right after one that took its whole burst:
// the queue outlasted it, a storm, served in a few turns rather than one
// per client. Any other turn starts again from one.
func (s *lsock) acceptAll() {
	turn := s.l.r.Turn()
	if turn == s.growAt {
		s.burst = min(2*s.burst, acceptBatch)
	} else {
		s.burst = 1
	}
	if s.acceptSome(s.burst) {
		s.growAt = turn + 1
	}
}

// backoffOver runs when the retry timer fires: the socket goes back into
// the epoll set and accepts, unless another process serves it now.
func (s *lsock) backoffOver() {
	if s.unwatched {
		return
	}
	if err := s.l.r.Register(s.fd, s, reactor.ListenEvents); err != nil {
		s.l.sh.Log.Warn("listener cannot rejoin its event loop, retrying", "listener", s.f.Name, "error", err)
		s.rest()
		return
	}
	s.resting = false
	s.acceptAll()
}

// acceptQueued accepts the connections waiting in s's queue, past the
// per-turn batch, before s closes: closing a listening socket resets the
// connections whose handshake completed but that were not accepted yet
// (unless net.ipv4.tcp_migrate_req moves them to a socket of the same
// group). The ones accepted here are relayed like any other, through the
// drain. It takes at most what the queue held when it looked (TCP_INFO's
// unacked is a listening socket's queue length), so clients arriving
// meanwhile cannot keep the loop here: the queue is bounded by the
// backlog, and only a handshake completing in the instant before the
// close is reset. It stops where accepting fails (out of fds: the rest
// are lost to the close either way), and skips a socket another process
// also holds (an upgrade's): its queue is that process's to serve.
func (s *lsock) acceptQueued() {
	if s.closed || s.unwatched || s.retry.Armed() {
		return
	}
	info, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return
	}
	for left := int(info.Unacked); left > 0; left -= acceptBatch {
		if !s.acceptSome(acceptBatch) {
			return
		}
	}
}

// acceptSome accepts up to burst clients and reports whether it took
// them all (more may be queued). A client lost on the way does not count;
// acceptBatch bounds the tries.
func (s *lsock) acceptSome(burst int) (all bool) {
	if s.closed {
		return false
	}
	n := 0
	for range acceptBatch {
		fd, src, err := s.accept(s.fd)
		if err == nil {
			if s.failures > 0 {
				s.l.sh.Log.Info("accepting again", "listener", s.f.Name, "failed_accepts", s.failures)
				s.failures, s.backoff = 0, 0
			}
			s.l.accepted(fd, src, s.f)
			if n++; n == burst {
				return true
			}
			continue
		}
		switch acceptFailure(err) {
		case queueEmpty:
			s.backoff = 0 // the next failure starts afresh
			return false
		case clientLost:
			continue // the next client may be fine
		}
		s.f.AcceptErrors.Add(1)
		s.failures++
		if s.backoff == 0 {
			s.l.sh.Log.Warn("accept failing, backing off", "listener", s.f.Name, "error", err)
		}
		s.rest()
		return false
	}
	return true
}

// rest backs off: out of fds, memory or buffers, the socket leaves the
// epoll set, where with clients queued it would be reported at every wait
// (it is level-triggered) and spin the loop, and the retry timer tries
// again, the wait doubling from minAcceptBackoff to maxAcceptBackoff.
func (s *lsock) rest() {
	s.backoff = min(max(2*s.backoff, minAcceptBackoff), maxAcceptBackoff)
	if !s.resting {
		s.l.r.Unwatch(s.fd)
		s.resting = true
	}
	s.l.r.Arm(&s.retry, s.l.r.Clock()+int64(s.backoff))
}

// acceptVerdict is what a failed accept(2) means for the queue behind it.
type acceptVerdict uint8

const (
	// queueEmpty: nothing left to accept (EAGAIN).
	queueEmpty acceptVerdict = iota
	// clientLost: that one client is gone (it reset, or a firewall
	// refused it) or came with a network error already pending on its
	// socket, which accept(2) passes on; the next one may be fine, so the
	// loop accepts on at once, as its man page asks ("treat them like
	// EAGAIN by retrying").
	clientLost
	// outOfResources: the process or the kernel is out of fds, memory or
	// buffers (EMFILE, ENFILE, ENOBUFS, ENOMEM...): the listener backs off.
	outOfResources
)

// acceptFailure classifies an error of accept4 (EINTR never reaches it).
func acceptFailure(err error) acceptVerdict {
	switch err {
	case unix.EAGAIN:
		return queueEmpty
	case unix.ECONNABORTED, unix.EPERM,
		// accept(2), "Error handling": the network errors of TCP/IP.
		unix.ENETDOWN, unix.EPROTO, unix.ENOPROTOOPT, unix.EHOSTDOWN,
		unix.ENONET, unix.EHOSTUNREACH, unix.EOPNOTSUPP, unix.ENETUNREACH:
		return clientLost
	}
	return outOfResources
}
