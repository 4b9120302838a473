package udpsession

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"unsafe"

	"github.com/l4lb/l4lb/pkg/flow"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// A binary upgrade's hand-over of UDP sessions (pkg/flow), the way
// pkg/relay hands over TCP relays. The new process holds the very same
// listener sockets, so SO_REUSEPORT steers a client's datagrams to the
// socket of the group they reached before: the session moves to the loop
// serving that socket (Serves), keeping its backend socket, so the backend
// sees the same source port. In the old process, Detach takes sessions
// off the loop as records with their backend sockets; in the new one,
// AdoptSession puts each together, held still (no datagram read, no
// timer) until Go, once the old process knows the new one holds it. A
// record the new process refuses is adopted back by the old one (Stay).

// ErrAdoptRecord: a session record names a descriptor its batch does not
// carry, a listener socket this loop does not serve, or addresses that do
// not decode.
var ErrAdoptRecord = errors.New("malformed hand-over record")

// adoption is what an adopted session takes up when it goes: its idle
// time, and its first datagram's breaker verdict still open.
type adoption struct {
	idle    int64
	verdict *flow.Verdict
}

// Serves reports whether the loop holds the listener socket whose
// identity (listener.SocketID) is socket, still open. Safe from any
// goroutine.
func (l *Loop) Serves(socket uint64) bool {
	ids := l.served.Load()
	return ids != nil && slices.Contains(*ids, socket)
}

// publishServed records the sockets open on the loop for Serves.
func (l *Loop) publishServed() {
	ids := make([]uint64, 0, len(l.udps))
	for _, u := range l.udps {
		if !u.closed {
			ids = append(ids, u.id)
		}
	}
	l.served.Store(&ids)
}

// Detach moves the loop's sessions into b while it has room, off this
// loop: their backend sockets leave the epoll set and their counts (the
// listener's max_sessions, the backend's, loop detection) are given back,
// and nothing of them is closed: b's descriptors are the caller's from
// now. Replies already read go out first. Sockets parked for reuse
// (reuse_sockets) are closed, not handed over: they carry no client, and
// the new process parks its own. Sessions adopted to stay (Adopted.Stay)
// are not detached. pending is 0 when the loop holds nothing more to hand
// over, at least 1 when b ran out of room first. On the loop.
func (l *Loop) Detach(b *flow.Batch) (pending int) {
	l.flushUDP()
	now := l.r.Now()
	for _, u := range l.udps {
		if u.closed {
			continue
		}
		u.closeParked()
		for s := u.idle.head; s != nil; {
			next := s.next // detach unlinks s
			if !s.stays {
				if !b.Room() {
					return 1
				}
				b.Sessions = append(b.Sessions, s.detach(b, now))
			}
			s = next
		}
	}
	return 0
}

// detach takes s off its loop as a record, its socket into b.
func (s *session) detach(b *flow.Batch, now int64) flow.Session {
	u := s.u
	r := flow.Session{
		Listener: u.f.Name, Pool: s.pool.Name, Backend: s.backend.ID, BackendAddr: s.backend.Addr,
		Socket: u.id, Client: s.client.String(),
		Name:        slices.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&s.name)), s.nameLen)),
		Control:     slices.Clone(s.ctl[:s.ctlLen]),
		ProxyHeader: slices.Clone(s.proxyHdr),
		Forced:      s.forced, Requests: s.requests, Responses: s.responses,
		Retired: s.retired, Excess: s.excess, Idle: now - s.lastActive, Drops: uint32(s.drops),
		Age: now - s.born, BytesToBackend: s.bytesToBackend, BytesToClient: s.bytesToClient,
	}
	if d := s.dial; d != nil {
		if force, gen, ok := d.settle.Open(); ok {
			r.Verdict = &flow.Verdict{Force: force, Generation: gen}
			if d.timer.Armed() {
				r.Verdict.Left = max(0, d.timer.At()-now)
			}
		}
		u.l.r.Disarm(&d.timer)
		// Settled by the process the session goes to; the datagrams kept
		// for a re-send stay here, not known lost: the new process counts
		// them dropped if the backend refuses (Go).
		s.dial = nil
	}
	s.forgetOwnDial()
	u.l.r.Unwatch(s.fd) // another process holds the socket: closing would not remove it
	u.l.r.Forget(s.fd)
	r.FD = b.AddFD(s.fd)
	s.fd = -1
	s.ended = true
	u.f.sockets.Add(-1)
	s.pool.Detach(s.backend)
	if !s.retired {
		u.forgetClient(s)
	}
	u.idle.remove(s)
	u.l.interim.Remove(&s.interimAt) // no record here: the new process writes its close (docs/operations.md)
	u.f.Sessions.Add(-1)
	u.f.HandedOut.Add(1)
	return r
}

// Adopted is a handed-over session put together on a loop and held still
// until Go.
type Adopted struct{ s *session }

// Stay marks an adopted session as one this process keeps until it ends:
// the old process adopting back what the new one refused, or could not be
// given. Before Go.
func (a *Adopted) Stay() { a.s.stays = true }

// AdoptSession puts session r (its backend socket in b) together on the
// loop's socket r.Socket of listener f, its backend be of pool p, held
// still until Go: the socket is in the epoll set, and what arrives on it
// waits. On an error nothing is taken: the descriptor is still the
// caller's. On the loop.
func (l *Loop) AdoptSession(r *flow.Session, b *flow.Batch, f *Front, p *pool.Pool, be *pool.Backend) (*Adopted, error) {
	var u *udpSock
	for _, o := range l.udps {
		if o.id == r.Socket && !o.closed {
			u = o
		}
	}
	if u == nil {
		return nil, fmt.Errorf("%w: session of %s: this loop serves no listener socket %d", ErrAdoptRecord, r.Client, r.Socket)
	}
	if u.f != f {
		return nil, fmt.Errorf("%w: session of %s: socket %d is listener %s's, not %s's", ErrAdoptRecord, r.Client, r.Socket, u.f.Name, f.Name)
	}
	if p == nil || be == nil {
		return nil, fmt.Errorf("%w: session of %s: no backend %s in pool %s", ErrAdoptRecord, r.Client, r.BackendAddr, r.Pool)
	}
	fd, ok := b.FD(r.FD)
	if !ok || fd < 0 {
		return nil, fmt.Errorf("%w: session of %s without its socket", ErrAdoptRecord, r.Client)
	}
	s := &session{u: u, fd: fd, pool: p, backend: be, forced: r.Forced,
		requests: r.Requests, responses: r.Responses, retired: r.Retired, excess: r.Excess,
		drops: dropCount(r.Drops), proxyHdr: slices.Clone(r.ProxyHeader),
		bytesToBackend: r.BytesToBackend, bytesToClient: r.BytesToClient, born: -max(0, r.Age),
		adopt: &adoption{idle: max(0, r.Idle)}}
	if err := s.adoptAddrs(r); err != nil {
		return nil, err
	}
	if v := r.Verdict; v != nil {
		s.adopt.verdict = &flow.Verdict{Force: v.Force, Generation: v.Generation, Left: v.Left}
	}
	if err := l.r.Register(fd, s, reactor.DatagramEvents); err != nil {
		return nil, err
	}
	u.held.pushBack(s)
	return &Adopted{s}, nil
}

// adoptAddrs takes the client's socket address and the replies' control
// message from r: the address the kernel wrote must be the client's.
func (s *session) adoptAddrs(r *flow.Session) error {
	client, err := netip.ParseAddrPort(r.Client)
	if err != nil {
		return fmt.Errorf("%w: client %q: %v", ErrAdoptRecord, r.Client, err)
	}
	name := unsafe.Slice((*byte)(unsafe.Pointer(&s.name)), unsafe.Sizeof(s.name))
	n := copy(name, r.Name)
	s.nameLen = uint32(n)
	if n != len(r.Name) || s.nameLen != nameLen(&s.name) || nameAddrPort(&s.name) != client {
		return fmt.Errorf("%w: client %s: socket address %x is not its", ErrAdoptRecord, r.Client, r.Name)
	}
	s.client = client
	if len(r.Control) > len(s.ctl) {
		return fmt.Errorf("%w: client %s: reply control message of %d bytes", ErrAdoptRecord, r.Client, len(r.Control))
	}
	s.ctlLen = uint8(copy(s.ctl[:], r.Control))
	return nil
}

// Go lets an adopted session run: it counts from now where the old
// process's did (max_sessions, above the cap if need be: it is open
// already; its backend's), its client's datagrams find it, its idle time
// and its reply timeout go on from what was left, and it reads at once
// what its backend sent meanwhile. On the loop.
func (a *Adopted) Go() {
	s := a.s
	ad := s.adopt
	if ad == nil || s.ended {
		return // closed while held (the loop stopped)
	}
	s.adopt = nil
	u := s.u
	l := u.l
	now := l.r.Now()
	u.held.remove(s)
	u.f.sockets.Add(1)
	cut := s.pool.Adopt(s.backend)
	s.recordOwnDial(s.backend.AddrPort)
	u.f.Sessions.Add(1)
	u.f.HandedIn.Add(1)
	if !s.retired {
		if fresh := u.sessions[s.client]; fresh != nil {
			// The client's datagram reached this process before its
			// session did, and opened another: the client goes on with
			// the session its backend knows, and the other relays what
			// its backend still sends until it ends.
			fresh.retired = true
		}
		u.sessions[s.client] = s
		u.peak = max(u.peak, len(u.sessions))
	}
	s.lastActive = now - ad.idle
	s.born += now
	u.idle.insertByActivity(s)
	s.listInterim() // its interim records go on from here
	u.armExpiry(s.lastActive + int64(u.f.Settings().SessionTimeout))
	if cut {
		s.end(EndMoved) // its drain's deadline passed while it moved, as cutBackend ends it
		return
	}
	if v := ad.verdict; v != nil {
		// No candidates and no copies of what the client sent while the
		// dial is open (the record carries neither): a refusal now ends
		// the session instead of trying the next backend, and counts as
		// dropped every datagram the session sent, all to this backend
		// with no reply yet (one the old process counted dropped already,
		// when an earlier candidate refused, counts again: the record
		// does not say which).
		d := &udpDial{settle: s.pool.Resume(s.backend, v.Force, v.Generation), unkept: s.requests}
		d.timer.OnFire(s.replyTimedOut)
		s.dial = d
		l.r.Arm(&d.timer, now+max(0, v.Left))
	}
	// Replies that came while it was held raised edges no one acted on.
	s.queued = true
	l.r.MarkReady(s)
}

// dropAdopted closes an adopted session that never went (the loop
// stopped first): nothing of it was counted yet.
func (s *session) dropAdopted() {
	u := s.u
	u.held.remove(s)
	u.l.r.Forget(s.fd)
	rawsys.Close(s.fd)
	s.fd = -1
	s.ended = true
	s.adopt = nil
}
