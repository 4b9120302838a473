package udpsession

import (
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/loopguard"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxyproto"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// udpSock is a loop's own socket of one UDP listener and the sessions of
// the clients the kernel steers to it (SO_REUSEPORT hashes a client's
// address and port to one socket of the group, so a client's datagrams
// all reach one loop).
type udpSock struct {
	l        *Loop
	fd       int
	id       uint64 // the socket's identity (listener.SocketID), the same in every process holding it
	f        *Front
	local    netip.AddrPort // the bound address (its IP is unspecified when wildcard)
	wildcard bool
	closed   bool
	queued   bool // on the loop's ready list
	// roomAsked: another loop at max_sessions asked this one to evict its
	// longest-idle session, and the request is still pending.
	roomAsked atomic.Bool

	sessions map[netip.AddrPort]*session // by client; retired sessions are not here
	peak     int                         // most entries the map has held since it was made
	idle     sessionList                 // every session, longest idle first
	held     sessionList                 // sessions handed over, not yet going (handover.go)
	expiry   reactor.Timer               // the longest-idle session's session_timeout, or a parked socket's TTL
	drops    dropCount                   // the socket's drop count (SO_RXQ_OVFL) as last seen

	parked  map[*pool.Backend][]*parkedSock // sockets left by sessions that ended cleanly
	nparked int

	// This turn's counts, flushed to f's with the loop's counters.
	dgToBackend, dgToClient       int64
	bytesToBackend, bytesToClient int64
}

// udpReadBudget bounds the datagrams one socket takes per turn, so a flood
// on one listener or from one backend does not starve the loop's other
// sockets and connections.
const udpReadBudget = 4 * udpBatch

// AddListener hands the loop its socket of UDP listener f (local is the
// bound address; wildcard says it carries packet info). Call it before
// Start, or on the loop (Do) for a reload; then f.Publish once every loop
// has its socket.
func (l *Loop) AddListener(fd int, f *Front, local netip.AddrPort, wildcard bool) error {
	if l.udpIn == nil {
		l.udpIn, l.udpOut, l.udpRun = newMmsgBatch(), newUDPOut(), new([udpBatch]unix.Iovec)
	}
	u := &udpSock{l: l, fd: fd, f: f, local: local, wildcard: wildcard,
		sessions: make(map[netip.AddrPort]*session), parked: make(map[*pool.Backend][]*parkedSock)}
	u.expiry.OnFire(u.expire)
	id, err := listener.SocketID(fd)
	if err != nil {
		return err
	}
	u.id = id
	if err := watchDrops(fd); err != nil {
		return err
	}
	base, err := socketDrops(fd) // an inherited socket's drops were its first process's to count
	if err != nil {
		return err
	}
	u.drops = dropCount(base)
	if err := l.r.Register(fd, u, reactor.DatagramEvents); err != nil {
		return err
	}
	l.udps = append(l.udps, u)
	l.publishServed()
	f.sockMu.Lock()
	f.added = append(f.added, u)
	f.sockMu.Unlock()
	return nil
}

// DetachListener closes the loop's socket of UDP listener f and ends
// its sessions (a reload that removed it). Call it on the loop (Do).
func (l *Loop) DetachListener(f *Front) {
	kept := l.udps[:0]
	for _, u := range l.udps {
		if u.f == f {
			u.close()
			continue
		}
		kept = append(kept, u)
	}
	clear(l.udps[len(kept):])
	l.udps = kept
	l.publishServed()
}

// EachSocket calls fn with the loop's socket of UDP listener f, if it
// has one (a reload setting an option on it). Call it on the loop (Do).
func (l *Loop) EachSocket(f *Front, fn func(fd int)) {
	for _, u := range l.udps {
		if u.f == f && !u.closed {
			fn(u.fd)
		}
	}
}

// Publish tells the listener's loops about each other's sockets, once
// every loop has its own (AddListener), so a loop at max_sessions can
// ask the others for room.
func (f *Front) Publish() {
	f.sockMu.Lock()
	socks := append([]*udpSock(nil), f.added...)
	f.sockMu.Unlock()
	f.socks.Store(&socks)
}

func (u *udpSock) Event(uint32) { u.readAll() }

func (u *udpSock) Resume() {
	u.queued = false
	u.readAll()
}

// readAll takes the client datagrams waiting on the socket, up to the
// budget; what is left waits for the next turn.
func (u *udpSock) readAll() {
	in := u.l.udpIn
	for taken := 0; taken < udpReadBudget; {
		if u.closed {
			return
		}
		in.prepareRecv(0, udpBatch, true, true) // packet info when wildcard, drop counts always
		n, err := recvmmsg(u.fd, in, 0, udpBatch)
		if err != nil {
			return // EAGAIN: drained (an error on a listening UDP socket is a stray ICMP: nothing to do)
		}
		u.countOverflow(&u.drops, in, 0, n)
		u.relay(in, n)
		if n < udpBatch {
			return // the queue ran dry; its next datagram brings a new edge
		}
		taken += n
	}
	if !u.queued && !u.closed {
		u.queued = true
		u.l.r.MarkReady(u)
	}
}

// relay sends the n datagrams of a batch on. Consecutive datagrams of one
// session (a client's burst) go together on its socket; a new session's
// first datagram, and any a batch send could not take, go one by one. A
// refusal the batch send finds (ICMP about an earlier datagram) is the
// session's to act on, as for a single send (refusedRun).
func (u *udpSock) relay(in *mmsgBatch, n int) {
	if u.f.Settings().Requests > 0 {
		// A session may retire in the middle of a burst: every datagram
		// must find its session anew.
		for i := range n {
			u.one(in, i)
		}
		return
	}
	var run *session
	start := 0
	for i := range n {
		var s *session
		if run != nil && i > start && in.names[i] == in.names[i-1] {
			s = run // the burst goes on: same client, no lookup
		} else if s = u.sessions[nameAddrPort(&in.names[i])]; s != nil && s != run && !s.backend.Usable() {
			s = nil // moving on: the one-by-one path re-picks
		}
		if s != run {
			u.sendRun(in, run, start, i)
			run, start = s, i
		}
		if s == nil {
			u.one(in, i) // a new session, or one moving on
			run, start = nil, i+1
		}
	}
	u.sendRun(in, run, start, n)
}

// sendRun sends datagrams [from, to) of the batch on s's socket: as one
// GSO send when it can, else one by one. Not with sendmmsg: a refusal
// reported to one of its later sends (the ICMP about an earlier datagram,
// which from a local backend comes back before that datagram's send
// returns) makes it return what it sent with no error, the refusal
// cleared in the kernel: it would be lost, and the rest of the burst sent
// to the refusing port. Each single send reports it.
func (u *udpSock) sendRun(in *mmsgBatch, s *session, from, to int) {
	if s == nil || from >= to {
		return
	}
	// A burst cannot carry a header before each datagram (GSO segments
	// one buffer).
	if size, ok := gsoRun(in, from, to); ok && !s.noGSO && s.proxyHdr == nil {
		iovs := u.l.udpRun[:to-from]
		for i := from; i < to; i++ {
			iovs[i-from].Base = &in.data[i*udpSlot]
			iovs[i-from].SetLen(int(in.hdrs[i].Len))
		}
		err, unsupported := sendGSO(s.fd, iovs, size)
		if err == nil {
			s.sentRun(in, from, to)
			u.f.Bursts.Add(1)
			return
		}
		if isRefusal(err) {
			u.refusedRun(in, s, err, from, to)
			return
		}
		s.noGSO = s.noGSO || unsupported
	}
	for i := from; i < to; i++ {
		u.one(in, i)
	}
}

// refusedRun: the batch send found the backend's refusal of an earlier
// datagram (and the kernel cleared it, sending nothing). The session deals
// with it as a single send would, and the run goes one by one, to
// wherever its session now is.
func (u *udpSock) refusedRun(in *mmsgBatch, s *session, err error, from, to int) {
	s.failed(err, true)
	for i := from; i < to; i++ {
		u.one(in, i)
	}
}

// one relays datagram i of the batch on its own.
func (u *udpSock) one(in *mmsgBatch, i int) {
	h := &in.hdrs[i]
	var ctl []byte
	if u.wildcard {
		ctl = in.ctls[i][:h.Hdr.Controllen]
	}
	u.datagram(in.slot(i)[:h.Len], &in.names[i], ctl)
}

// datagram relays one client datagram: to its session, or to a new one.
// A send can find the backend's refusal of an earlier datagram; when that
// ends the session, the datagram gets one more try on a new one.
func (u *udpSock) datagram(p []byte, name *sockName, ctl []byte) {
	src := nameAddrPort(name)
	for range 2 {
		s := u.sessions[src]
		if s != nil && !s.backend.Usable() && s.mayMove() {
			s.end(EndMoved) // no flow stays pinned to a backend out of rotation
			s = nil
		}
		if s == nil {
			if s = u.open(src, name, ctl); s == nil {
				return // dropped and counted
			}
			if u.l.beforeFirstSend != nil {
				u.l.beforeFirstSend(s)
			}
		}
		if s.deliver(p) {
			return
		}
	}
	u.drop(DropRefused) // refused twice over: give up on this one
}

// open starts a session for a new client.
func (u *udpSock) open(src netip.AddrPort, name *sockName, ctl []byte) *session {
	if set := u.f.Settings(); !set.Deny.Empty() || !set.Allow.Empty() {
		a := src.Addr()
		if set.Deny.Contains(a) || !set.Allow.Empty() && !set.Allow.Contains(a) {
			u.drop(DropDenied)
			return nil
		}
	}
	if !u.reserve() {
		// The cap is held by the other loops' sessions: this datagram is
		// dropped, and they evict their longest-idle one each, so the
		// client's retry finds room instead of waiting for them to time
		// out.
		u.drop(DropSessionCap)
		u.askForRoom(false)
		return nil
	}
	s := &session{u: u, fd: -1, client: src, nameLen: nameLen(name), pool: u.f.Settings().Pool}
	s.name = *name
	dst := u.local.Addr()
	if u.wildcard {
		n, to, ok := replyCtl(ctl, &s.ctl)
		if ok {
			s.ctlLen, dst = uint8(n), to
		}
	}
	if s.pool.ProxyProtocol() == 2 {
		s.proxyHdr = proxyproto.AppendV2(nil, proxyproto.Datagram,
			netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), netip.AddrPortFrom(dst.Unmap(), u.local.Port()))
	}
	// Own sessions are recorded by getsockname's address, without a zone.
	bare := netip.AddrPortFrom(src.Addr().WithZone(""), src.Port())
	if u.l.guard.Has(loopguard.Conn{Local: bare, Remote: netip.AddrPortFrom(dst, u.local.Port())}) {
		u.f.sockets.Add(-1)
		u.drop(DropLoop) // one of this l4lb's own sessions: a backend leads back here
		return nil
	}
	if r := s.startDial(); r != dialStarted {
		u.drop(dropFor(r)) // the dial gave back the reservation
		return nil
	}
	s.lastActive = u.l.r.Now()
	s.born = s.lastActive
	u.sessions[src] = s
	u.peak = max(u.peak, len(u.sessions))
	u.track(s)
	s.listInterim()
	u.f.Sessions.Add(1)
	u.f.Started.Add(1)
	return s
}

// reserve counts a backend socket for a new session against
// max_sessions, closing a parked socket or evicting this loop's
// longest-idle session while the listener is at its cap. The count never
// passes the cap, even with every loop opening sessions at once; false:
// the cap is held by other loops' sockets.
func (u *udpSock) reserve() bool {
	for {
		n := u.f.sockets.Load()
		if n < u.f.Settings().MaxSessions {
			if u.f.sockets.CompareAndSwap(n, n+1) {
				return true
			}
			continue
		}
		if u.dropOldestParked() {
			continue
		}
		oldest := u.idle.head
		if oldest == nil {
			if u.f.Parked.Load() > 0 {
				// The room is parked on another loop: take it now and have
				// that loop close a parked socket. The cap is passed by at
				// most the sockets parked, for the moment it takes.
				u.f.sockets.Add(1)
				u.askForRoom(true)
				return true
			}
			return false
		}
		oldest.end(EndEvicted)
	}
}

// askForRoom asks the listener's other loops to free a socket each: a
// parked one, else (unless parkedOnly) their longest-idle session. One
// request per loop is pending at a time, so a flood at the cap does not
// flood the loops.
func (u *udpSock) askForRoom(parkedOnly bool) {
	socks := u.f.socks.Load()
	if socks == nil {
		return
	}
	for _, o := range *socks {
		if o == u || !o.roomAsked.CompareAndSwap(false, true) {
			continue
		}
		o.l.r.Post(func() {
			o.roomAsked.Store(false)
			if o.closed || o.dropOldestParked() || parkedOnly {
				return
			}
			if s := o.idle.head; s != nil {
				s.end(EndEvicted)
			}
		})
	}
}

// track puts a new session at the back of the idle list and makes sure
// the expiry timer runs.
func (u *udpSock) track(s *session) {
	u.idle.pushBack(s)
	u.armExpiry(s.lastActive + int64(u.f.Settings().SessionTimeout))
}

// armExpiry makes sure the expiry timer fires by at.
func (u *udpSock) armExpiry(at int64) {
	if !u.expiry.Armed() || at < u.expiry.At() {
		u.l.r.Arm(&u.expiry, at)
	}
}

// touch records activity on s: it becomes the most recently active.
func (u *udpSock) touch(s *session) {
	s.lastActive = u.l.r.Now()
	u.idle.moveToBack(s)
}

// expire ends the sessions idle for session_timeout and re-arms for the
// next one. Activity moves a session to the back without moving the
// timer, so the timer may fire early; it then only re-arms.
func (u *udpSock) expire(now int64) {
	timeout := int64(u.f.Settings().SessionTimeout)
	for s := u.idle.head; s != nil && s.lastActive+timeout <= now; s = u.idle.head {
		s.end(EndTimeout)
	}
	next := u.sweepParked(now)
	if s := u.idle.head; s != nil && (next == 0 || s.lastActive+timeout < next) {
		next = s.lastActive + timeout
	}
	if next != 0 {
		u.l.r.Arm(&u.expiry, next)
	}
}

// cutBackend ends the sessions on backend b (a drain's deadline); a
// backend still draining is usable, so they would not move on their own.
func (u *udpSock) cutBackend(b *pool.Backend) {
	for s := u.idle.head; s != nil; {
		next := s.next // end unlinks s
		if s.backend.Is(b) {
			s.end(EndMoved)
		}
		s = next
	}
}

// forgetClient removes s from the client map. A map keeps the buckets it
// grew, so once a crowd (a flood of source ports) has gone, a fresh one
// gives the memory back.
func (u *udpSock) forgetClient(s *session) {
	delete(u.sessions, s.client)
	if len(u.sessions) == 0 && u.peak > shrinkSessionsAt {
		u.sessions, u.peak = make(map[netip.AddrPort]*session), 0
	}
}

// shrinkSessionsAt is the map size past which an emptied map is replaced.
const shrinkSessionsAt = 1024

func (u *udpSock) drop(r DropReason) { u.dropN(r, 1) }

func (u *udpSock) dropN(r DropReason, n int) {
	u.f.Drops[r].Add(int64(n))
	if r == DropNoBackend && u.f.OnNoBackend != nil {
		u.f.OnNoBackend()
	}
}

// close ends every session and closes the socket (a drain or shutdown:
// a UDP client has no connection to finish, only datagrams to retry).
func (u *udpSock) close() {
	if u.closed {
		return
	}
	u.l.flushUDP() // replies already read go out first
	for s := u.idle.head; s != nil; s = u.idle.head {
		s.end(EndShutdown)
	}
	for s := u.held.head; s != nil; s = u.held.head {
		s.dropAdopted()
	}
	u.closeParked()
	u.closed = true
	u.l.publishServed()
	u.l.r.Disarm(&u.expiry)
	u.l.r.Forget(u.fd)
	unix.Close(u.fd)
	u.flushCounters()
}

func (u *udpSock) flushCounters() {
	f := u.f
	if u.dgToBackend != 0 {
		f.DatagramsToBackend.Add(u.dgToBackend)
		f.BytesToBackend.Add(u.bytesToBackend)
		u.dgToBackend, u.bytesToBackend = 0, 0
	}
	if u.dgToClient != 0 {
		f.DatagramsToClient.Add(u.dgToClient)
		f.BytesToClient.Add(u.bytesToClient)
		u.dgToClient, u.bytesToClient = 0, 0
	}
}
