package udpsession

import (
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/loopguard"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// session is one UDP client (address and port) of one listener, relayed
// through one connected socket to one backend. It lives in its loop's
// memory: no goroutine, no timer of its own once its backend has answered.
type session struct {
	u      *udpSock
	fd     int // connected to the backend; registered in the loop
	client netip.AddrPort
	// name is the client's socket address as the kernel wrote it, sent
	// back as the replies' destination; ctl makes a wildcard listener's
	// replies leave from the address the client sent to.
	name    sockName
	nameLen uint32
	ctl     [replyCtlSpace]byte
	ctlLen  uint8

	pool    *pool.Pool // the listener's pool when the session opened
	backend *pool.Backend
	dial    *udpDial // until the backend's first reply (or reply_timeout)
	forced  bool     // dialed as an all-down force-try (breaker rule 6)

	requests, responses int
	// born is when it opened (its first datagram), on the loop's clock;
	// bytesToBackend and bytesToClient what it relayed each way: its
	// access record (access.go) with requests and responses.
	born                          int64
	bytesToBackend, bytesToClient int64
	interimAt                     accesslog.Entry[*session] // the loop's schedule of interim records
	retired                       bool                      // took its `requests`: no longer in the client map
	excess                        bool                      // the backend sent more than `responses`
	refused                       error                     // a refusal read on fd while replies ahead of it are still being relayed
	noGSO                         bool                      // the socket's route cannot segment a burst (gso.go)
	drops                         dropCount                 // fd's drop count (SO_RXQ_OVFL) as last seen
	watched                       bool                      // SO_RXQ_OVFL is on for fd (watchReplies)
	ended                         bool
	queued                        bool // on the loop's ready list
	lastActive                    int64
	prev, next                    *session // the listener socket's idle list

	// Loop detection, as for TCP: the socket's ends while the backend is
	// a local address on a port l4lb listens on (rare: a pointer).
	own *loopguard.Conn

	// proxyHdr is the PROXY v2 header (DGRAM) every datagram to the
	// backend starts with, when the pool's proxy_protocol asks for it;
	// nil otherwise.
	proxyHdr []byte

	// adopt: handed over by another process and held still until Go
	// (handover.go); stays: adopted to stay, never detached again.
	adopt *adoption
	stays bool
}

// send sends one client datagram on the session's socket, behind the
// PROXY header when the pool wants one.
func (s *session) send(p []byte) error {
	if s.proxyHdr != nil {
		return sendDatagramAfter(s.fd, s.proxyHdr, p)
	}
	return sendDatagram(s.fd, p)
}

// udpDial is a session's first datagram as breaker evidence (a "dial"):
// the backend's reply settles it as a success, its refusal as a failure
// (and what the client sent meanwhile goes to the next candidate),
// reply_timeout without either as no evidence (a failure with
// count_no_reply).
type udpDial struct {
	cands   [pool.MaxCandidates]int
	n, next int
	force   bool
	cur     pool.Dial
	settle  *pool.Settlement
	// kept are copies of the client datagrams sent while the dial is
	// open, in order, to send them to the next candidate when this one
	// refuses (keepDatagrams, keepBytes); unkept counts those sent to this
	// candidate without a copy, lost if it refuses.
	kept      [][]byte
	keptBytes int
	unkept    int
	// firstKept is kept's first slot, in the dial's own allocation: a
	// session that sends one datagram (a DNS query) needs no other.
	firstKept [1][]byte
	timer     reactor.Timer
}

// keepDatagrams and keepBytes bound what a session keeps while its dial
// is open. Eight hold a client's opening flight (a QUIC Initial flight
// of two or three datagrams and its 0-RTT, a DNS client's retries, a
// short burst), and 16 KiB eight datagrams of a common MTU's size or a
// large DNS or handshake message. They bound the memory a flood of new
// clients pins: a dialing session holds what it sent, up to 16 KiB, only
// until its backend answers or reply_timeout; all of them at most
// max_sessions x 16 KiB (64 MiB at the default 4096), never more than
// clients sent in one reply_timeout. A datagram past them goes to the
// backend all the same; only its re-send after a refusal is lost, and
// counted.
const (
	keepDatagrams = 8
	keepBytes     = 16 << 10
)

// keep records p, just sent to the dial's candidate: a copy while the
// bounds allow, else a count.
func (d *udpDial) keep(p []byte) {
	if len(d.kept) == keepDatagrams || d.keptBytes+len(p) > keepBytes {
		d.unkept++
		return
	}
	d.kept = append(d.kept, append(make([]byte, 0, len(p)), p...))
	d.keptBytes += len(p)
}

// dialResult says how starting a session's dial went.
type dialResult uint8

const (
	dialStarted dialResult = iota
	dialNoBackend
	dialLocal
)

func dropFor(r dialResult) DropReason {
	if r == dialLocal {
		return DropLocal
	}
	return DropNoBackend
}

// startDial plans the candidates for the session's client and connects a
// socket to the first that takes it.
func (s *session) startDial() dialResult {
	d := &udpDial{}
	d.timer.OnFire(s.replyTimedOut)
	cands, force := s.pool.Plan(s.client, d.cands[:0])
	d.n, d.force = len(cands), force
	d.kept = d.firstKept[:0]
	s.dial = d
	return s.dialNext()
}

// dialNext connects to the next candidate that may still be tried: a
// parked socket to it, or a new one. The caller holds a socket reservation
// (max_sessions); a dial that finds no backend gives it back.
func (s *session) dialNext() dialResult {
	d, p, u := s.dial, s.pool, s.u
	for d.next < d.n {
		i := d.cands[d.next]
		b := p.At(i)
		d.next++
		if d.next > 1 && !b.Usable() {
			continue // tripped or went down since the plan
		}
		cur, ok := p.TryBeginDial(b, d.force) // the generation, before the first send
		if !ok {
			continue // at its max_connections (sessions): another loop took the last slot
		}
		d.cur = cur
		fd := -1
		s.drops, s.watched = 0, false    // a new socket's; a parked one brings its own
		if u.f.Settings().ReuseSockets { // turned off by a reload: what is parked waits for its TTL
			fd = u.unpark(b, s)
		}
		if fd < 0 {
			var local bool
			if fd, local = s.newSocket(b); local {
				s.dial = nil
				u.f.sockets.Add(-1)
				return dialLocal
			}
			if fd < 0 {
				continue // b refused the socket's connect (unreachable...)
			}
		}
		s.fd, s.backend, s.forced = fd, b, d.force
		d.settle = p.Await(d.cur)
		u.l.r.Arm(&d.timer, u.l.r.Now()+int64(p.ReplyTimeout()))
		s.recordOwnDial(b.AddrPort)
		return dialStarted
	}
	s.dial = nil
	u.f.sockets.Add(-1)
	return dialNoBackend
}

// newSocket opens and registers a socket connected to b for the dial in
// flight, ending the dial when that fails: -1 and local for local trouble
// (no backend blamed), -1 alone for b's fault.
func (s *session) newSocket(b *pool.Backend) (fd int, local bool) {
	d, p := s.dial, s.pool
	fd, err := connectUDP(b.AddrPort)
	if err != nil {
		o := dialer.Classify(&dialer.DialError{Backend: b.Addr, Err: err})
		p.EndDial(d.cur, o)
		return -1, o == dialer.Local
	}
	if err := s.u.l.r.Register(fd, s, reactor.DatagramEvents); err != nil {
		unix.Close(fd)
		p.EndDial(d.cur, dialer.Local)
		return -1, true
	}
	return fd, false
}

// connectUDP opens a non-blocking UDP socket connected to ap: the kernel
// picks the source port, filters what comes back to ap's datagrams, and
// reports ICMP errors about ap on this socket.
func connectUDP(ap netip.AddrPort) (int, error) {
	family, sa := rawsys.SockaddrOf(ap)
	fd, err := rawsys.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, err
	}
	if err = rawsys.SetZone(fd, ap, &sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err = rawsys.Connect(fd, &sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// sentRun accounts datagrams [from, to) of a batch sent together (no
// `requests` limit: relay sends bursts only without one).
func (s *session) sentRun(in *mmsgBatch, from, to int) {
	if from >= to {
		return
	}
	u := s.u
	total := int64(0)
	for i := from; i < to; i++ {
		total += int64(in.hdrs[i].Len)
	}
	n := int64(to - from)
	u.dgToBackend += n
	u.bytesToBackend += total
	s.bytesToBackend += total
	s.backend.Meter.ToBackend.Add(total)
	u.touch(s)
	s.requests += int(n)
	if d := s.dial; d != nil {
		for i := from; i < to; i++ {
			d.keep(in.slot(i)[:in.hdrs[i].Len])
		}
	}
}

// mayMove reports whether a session whose backend is out of rotation
// should be re-picked. A force-try session (every backend was out) stays
// while every backend still is: a new session would be another force-try,
// a new socket for each datagram.
func (s *session) mayMove() bool {
	if !s.forced {
		return true
	}
	var buf [pool.MaxCandidates]int
	_, force := s.pool.Plan(s.client, buf[:0])
	return !force
}

// sent accounts client datagram p, which the backend socket took, and
// keeps it while the dial is open.
func (s *session) sent(p []byte) {
	u := s.u
	n := int64(len(p))
	u.dgToBackend++
	u.bytesToBackend += n
	s.bytesToBackend += n
	s.backend.Meter.ToBackend.Add(n)
	u.touch(s)
	s.requests++
	if d := s.dial; d != nil {
		d.keep(p)
	}
	if r := u.f.Settings().Requests; r > 0 && s.requests >= r && !s.retired {
		// Retired: the client's next datagram starts a new session, while
		// this one still relays replies until it ends.
		s.retired = true
		u.forgetClient(s)
	}
}

// deliver sends client datagram p on the session's socket. A refusal
// reported to the send moves a dialing session on to its next candidate
// (with the datagrams kept for it) and p follows; each move takes a
// candidate, so the loop ends. false: the session ended refused, p not
// sent; true: p was sent, or dropped and counted.
func (s *session) deliver(p []byte) bool {
	for {
		err := s.send(p)
		if err == nil {
			s.sent(p)
			return true
		}
		switch s.failed(err, true) {
		case notRefused:
			s.u.drop(DropBackendSend)
			if s.requests == 0 {
				// Nothing went to the backend: no dial to judge it by.
				s.end(EndError)
			}
			return true
		case refusedEnded:
			return false
		}
	}
}

// resent accounts a kept datagram sent again, to the next candidate after
// a refusal. It is still one client datagram: its first send counted it
// for the listener (what clients sent it), the session's access record
// and `requests`, and it does not count there again; the refusing
// backend's bytes keep it (it was sent there), and the new backend's
// count it now (it is sent here too).
func (s *session) resent(n int) {
	s.backend.Meter.ToBackend.Add(int64(n))
	s.u.touch(s)
}

// refusal is what failed made of an error from the backend socket.
type refusal uint8

const (
	// notRefused: another error, the caller's to handle.
	notRefused refusal = iota
	// movedOn: the dial went on to the next candidate that took the
	// datagrams kept for it; the session goes on there.
	movedOn
	// refusedEnded: the session ended, its datagrams not re-sent counted
	// dropped.
	refusedEnded
)

// failed handles an error from the backend socket (an ICMP error the
// kernel reports on the next send or receive); a refusal or
// unreachability means the datagram being sent, if any, was not taken.
// A refusal of the first datagram's dial moves the session to the next
// candidate, as a TCP connect would be retried, with what was kept for
// it; pending says the caller holds a datagram it sends there next (the
// refusal was reported to its send), so the move is worth it even when
// nothing was kept.
func (s *session) failed(err error, pending bool) refusal {
	if !isRefusal(err) {
		return notRefused
	}
	u := s.u
	d := s.dial
	if d == nil {
		u.drop(DropRefused) // at least the datagram the error is about is lost
		s.endRefused(err)
		return refusedEnded
	}
	for {
		d.settle.Settle(dialer.Failure)
		u.l.r.Disarm(&d.timer)
		s.closeBackend()
		u.dropN(DropRefused, d.unkept) // sent to the refusing candidate alone
		d.unkept = 0
		if len(d.kept) == 0 && !pending {
			s.dial = nil
			break
		}
		u.f.sockets.Add(1) // the closed socket's place in max_sessions goes to the next
		if r := s.dialNext(); r != dialStarted {
			why := DropRefused // refused by every candidate
			if r == dialLocal {
				why = DropLocal
			}
			u.dropN(why, len(d.kept))
			break
		}
		if err = s.resendKept(); err == nil {
			return movedOn
		}
		// The next candidate refused too, reported to a re-send.
	}
	s.endRefused(err)
	return refusedEnded
}

// resendKept sends the dial's kept datagrams, in order, to the candidate
// it has just connected to. A refusal reported to one of them is that
// candidate's, returned for the caller to move on; a datagram the socket
// did not take otherwise is dropped and no longer kept.
func (s *session) resendKept() error {
	d := s.dial
	for i := 0; i < len(d.kept); {
		p := d.kept[i]
		err := s.send(p)
		if err == nil {
			s.resent(len(p))
			i++
			continue
		}
		if isRefusal(err) {
			return err
		}
		s.u.drop(DropBackendSend)
		d.kept = slices.Delete(d.kept, i, i+1)
		d.keptBytes -= len(p)
	}
	return nil
}

// endRefused ends a session its backend refused.
func (s *session) endRefused(err error) {
	if err == unix.ECONNREFUSED {
		s.end(EndRefused)
	} else {
		s.end(EndError)
	}
}

// isRefusal: the ICMP errors a connected UDP socket reports about its
// backend (port or host unreachable).
func isRefusal(err error) bool {
	return err == unix.ECONNREFUSED || err == unix.EHOSTUNREACH || err == unix.ENETUNREACH || err == unix.EHOSTDOWN
}

func (s *session) Event(ev uint32) {
	if s.ended || s.adopt != nil {
		return // held: Go reads what came meanwhile
	}
	s.readReplies()
}

func (s *session) Resume() {
	s.queued = false
	if !s.ended && s.adopt == nil {
		s.readReplies()
	}
}

// readReplies moves the backend's datagrams into the loop's reply batch,
// addressed to the client; the batch goes out with sendmmsg when full and
// at the end of the turn.
func (s *session) readReplies() {
	u, out := s.u, s.u.l.udpOut
	for taken := 0; ; {
		if taken >= udpReadBudget {
			if !s.queued {
				s.queued = true
				u.l.r.MarkReady(s) // more may wait: after the loop's other work
			}
			return
		}
		if out.full() {
			u.l.flushUDP()
		}
		from := out.n
		room := udpBatch - from
		out.b.prepareRecv(from, room, false, s.watched)
		n, err := recvmmsg(s.fd, out.b, from, room)
		if err != nil {
			if isRefusal(err) && s.refused == nil {
				// The kernel reports the error before the datagrams that
				// came ahead of it: relay those first, then act on it.
				s.refused = err
				continue
			}
			if err == unix.EMSGSIZE {
				// A path MTU report (ICMP fragmentation needed) about a
				// datagram sent earlier: that one is lost, the socket is fine.
				u.drop(DropBackendSend)
				taken++
				continue
			}
			if err != unix.EAGAIN && s.failed(err, false) == notRefused {
				s.end(EndError)
				return
			}
			break // drained
		}
		if s.watched {
			u.countOverflow(&s.drops, out.b, from, n)
		} else if n > 1 || n == room {
			s.watchReplies()
		}
		keep := n
		if r := u.f.Settings().Responses; r > 0 && n > r-s.responses {
			keep = r - s.responses // replies past the limit are not relayed,
			s.excess = true        // and the socket is not parked: the backend says more than asked
			u.dropN(DropExcessReply, n-keep)
		}
		for i := from; i < from+keep; i++ {
			out.add(i, s)
			s.bytesToClient += int64(out.b.hdrs[i].Len)
		}
		s.responses += keep
		u.touch(s)
		if d := s.dial; d != nil {
			d.settle.Settle(dialer.Success)
			u.l.r.Disarm(&d.timer)
			s.dial = nil
		}
		if r := u.f.Settings().Responses; r > 0 && s.responses >= r {
			s.end(EndResponses)
			return
		}
		if n < room {
			break // drained: the next datagram brings a new edge
		}
		taken += n
	}
	if refused := s.refused; refused != nil && !s.ended {
		s.refused = nil
		s.failed(refused, false)
	}
}

// replyTimedOut settles a first datagram the backend did not answer:
// silence is a failure only where the pool counts it (count_no_reply);
// many UDP protocols never reply.
func (s *session) replyTimedOut(int64) {
	d := s.dial
	if d == nil || s.ended {
		return
	}
	s.u.f.Unanswered.Add(1)
	o := dialer.Local
	if s.pool.CountNoReply() {
		o = dialer.Failure
	}
	d.settle.Settle(o)
	s.dial = nil
}

// closeBackend closes the backend socket and gives back the backend's
// count.
func (s *session) closeBackend() {
	if s.fd < 0 {
		return
	}
	s.forgetOwnDial()
	s.u.l.r.Forget(s.fd)
	rawsys.Close(s.fd)
	s.fd = -1
	// A refusal still pending was read on this socket: it is this
	// backend's, acted on already by whatever closed the socket, never
	// the next backend's.
	s.refused = nil
	s.u.f.sockets.Add(-1)
	s.pool.EndRelay(s.backend)
}

// end closes the session. A first datagram still unanswered is no
// evidence either way.
func (s *session) end(why SessionEnd) {
	if s.ended {
		return
	}
	s.ended = true
	u := s.u
	park := s.parkable(why)
	if d := s.dial; d != nil {
		u.l.r.Disarm(&d.timer)
		d.settle.Settle(dialer.Local)
		s.dial = nil
	}
	if park {
		s.park()
	} else {
		s.closeBackend()
	}
	if !s.retired {
		u.forgetClient(s)
	}
	u.idle.remove(s)
	u.f.Sessions.Add(-1)
	u.f.Ended[why].Add(1)
	s.record(why)
}

// recordOwnDial and forgetOwnDial: see conn.recordOwnDial.
func (s *session) recordOwnDial(backend netip.AddrPort) {
	if !s.u.l.guard.MayLoop(backend) {
		return
	}
	if local, err := rawsys.Getsockname(s.fd); err == nil {
		s.own = &loopguard.Conn{Local: local, Remote: backend}
		s.u.l.guard.Add(*s.own)
	}
}

func (s *session) forgetOwnDial() {
	if s.own != nil {
		s.u.l.guard.Remove(*s.own)
		s.own = nil
	}
}
