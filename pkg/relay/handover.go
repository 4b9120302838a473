package relay

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/flow"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// A binary upgrade's hand-over of established connections (pkg/flow). In
// the old process, Detach takes relays and queued clients off the loop as
// records with their descriptors. In the new process, Adopt puts each
// together on a loop, held still (no byte moves, no timer runs) until Go:
// the old process keeps its own descriptors until the new one has said it
// holds the connection, and a connection that moved no byte in between
// is the same connection in either process. A record the new process
// refuses is adopted back by the old one, the same way.

// Detach moves the loop's established relays and clients queued for a
// backend slot into b while it has room, off this loop: their sockets
// leave the epoll set and their counts (the server's, the backend's, the
// source's) are given back, and nothing of them is closed: b's
// descriptors are the caller's from now. Clients still being set up (a
// PROXY header, a dial) stay, to be detached once established or queued;
// so do relays whose two directions have ended, about to close. pending
// counts those, and is at least 1 when b ran out of room: 0 means the
// loop holds nothing more to hand over. Connections adopted back to stay
// (Adopted.Stay) are neither. On the loop.
func (l *Loop) Detach(b *flow.Batch) (pending int) {
	for c := range l.conns {
		if c.stays {
			continue
		}
		if !b.Room() {
			return pending + 1
		}
		switch {
		case c.phase == phaseRelaying && c.lingerUntil == 0 && !(c.ended[0] && c.ended[1]):
			b.Relays = append(b.Relays, c.detachRelay(b))
		case c.slotWaiting():
			b.Queued = append(b.Queued, c.detachQueued(b))
		default:
			pending++
		}
	}
	return pending
}

// DetachQueued is Detach for the clients queued for a slot only. The
// server takes them off every loop before any relay: a relay detached
// gives its slot back here, and a client still queued on another loop
// would be dialed into it while the relay goes on in the other process.
func (l *Loop) DetachQueued(b *flow.Batch) (pending int) {
	for c := range l.conns {
		if c.stays || !c.slotWaiting() {
			continue
		}
		if !b.Room() {
			return 1
		}
		b.Queued = append(b.Queued, c.detachQueued(b))
	}
	return 0
}

func (c *conn) detachRelay(b *flow.Batch) flow.Relay {
	l := c.l
	now := l.r.Clock()
	r := flow.Relay{
		Listener: c.f.Name, Pool: c.pool.Name, Backend: c.backend.ID, BackendAddr: c.backend.Addr,
		Client: c.src.String(), Sourced: c.sourced, ProxySent: c.pool.ProxyProtocol() != 0,
		ClientEnd: c.cl.state(), BackendEnd: c.be.state(),
		Age: now - c.born, Idle: now - c.lastActive, SendQueues: c.outq,
	}
	if c.dst.IsValid() {
		r.Dst = c.dst.String()
	}
	if force, gen, ok := c.settle.Open(); ok {
		v := &flow.Verdict{Force: force, Generation: gen}
		if c.early != nil && c.early.timer.Armed() {
			v.Left = max(0, c.early.timer.At()-now)
		}
		r.Verdict = v
	}
	r.ServerName, r.Route = c.routeRecord()
	for d := range 2 {
		st := c.streams[d].Detach(l.scratch)
		st.Ended = c.ended[d]
		st.PipeR, st.PipeW = b.AddFD(st.PipeR), b.AddFD(st.PipeW)
		b.HeldBytes += len(st.Held)
		r.Streams[d] = st
	}
	r.ClientFD, r.BackendFD = c.letGo(&c.cl, b), c.letGo(&c.be, b)
	c.pool.Detach(c.backend)
	c.leave()
	return r
}

func (c *conn) detachQueued(b *flow.Batch) flow.Queued {
	now := c.l.r.Clock()
	q := flow.Queued{
		Listener: c.f.Name, Pool: c.pool.Name, Client: c.src.String(), Sourced: c.sourced,
		ClientEnd: c.cl.state(), Age: now - c.born, Waited: now - c.queuedAt,
	}
	if c.dst.IsValid() {
		q.Dst = c.dst.String()
	}
	if s := c.spent; s != nil {
		q.BudgetLeft, q.Budgeted, q.Forced = s.left, s.budgeted, s.forced
	}
	q.ServerName, q.Route = c.routeRecord()
	c.waiting = false // its slice entry goes at the next retry pass
	q.ClientFD = c.letGo(&c.cl, b)
	c.leave()
	return q
}

func (e *endpoint) state() flow.End {
	return flow.End{PeerDone: e.peerDone, HangUp: e.hup, Urgent: e.urgent}
}

// letGo takes e's socket out of the loop without closing it, into b.
func (c *conn) letGo(e *endpoint, b *flow.Batch) int {
	c.l.r.Unwatch(e.fd) // another process holds the socket: closing would not remove it
	c.l.r.Forget(e.fd)
	i := b.AddFD(e.fd)
	e.fd = -1
	return i
}

// leave ends a detached connection's life on this loop: what close does
// but closing, resetting, counting a close or writing a record.
func (c *conn) leave() {
	c.phase = phaseClosed
	c.disarm()
	c.forgetOwnDial()
	if c.sourced {
		c.policy.Sources.Release(c.src.Addr())
	}
	c.unlist()
	c.f.HandedOut.Add(1)
}

// Adopted is a handed-over connection put together on a loop and held
// still until Go.
type Adopted struct{ c *conn }

// Stay marks an adopted connection as one this process keeps until it
// ends: the old process adopting back what the new one refused, or could
// not be given. Before Go.
func (a *Adopted) Stay() { a.c.stays = true }

// ErrAdoptRecord: a record names a descriptor its batch does not carry,
// or addresses that do not parse.
var ErrAdoptRecord = errors.New("malformed hand-over record")

// AdoptRelay puts relay r (its descriptors in b) together on the loop for
// listener f, its backend be of pool p, held still until Go. On an error
// nothing is taken: the descriptors are still the caller's. On the loop.
func (l *Loop) AdoptRelay(r *flow.Relay, b *flow.Batch, f *Front, p *pool.Pool, be *pool.Backend) (*Adopted, error) {
	src, dst, err := parseAddrs(r.Client, r.Dst)
	if err != nil {
		return nil, err
	}
	clfd, ok1 := b.FD(r.ClientFD)
	befd, ok2 := b.FD(r.BackendFD)
	if !ok1 || !ok2 || clfd < 0 || befd < 0 {
		return nil, fmt.Errorf("%w: relay of %s without its sockets", ErrAdoptRecord, r.Client)
	}
	c := l.newAdopted(f, p, src, dst, r.Sourced, r.Age)
	c.backend = be
	c.lastActive = -r.Idle // from Go's now
	c.outq = r.SendQueues
	c.cl.fd, c.be.fd = clfd, befd
	c.cl.setState(r.ClientEnd)
	c.be.setState(r.BackendEnd)
	for d := range 2 {
		st := r.Streams[d]
		var okR, okW bool
		// A refusal gives back what the streams before it adopted (a
		// pipe counted in the pool would stay counted for good).
		if st.PipeR, okR = b.FD(st.PipeR); !okR {
			c.unadopt()
			return nil, fmt.Errorf("%w: relay of %s without its pipe", ErrAdoptRecord, r.Client)
		}
		if st.PipeW, okW = b.FD(st.PipeW); !okW {
			c.unadopt()
			return nil, fmt.Errorf("%w: relay of %s without its pipe", ErrAdoptRecord, r.Client)
		}
		if err := c.streams[d].Adopt(st, l.scratch); err != nil {
			c.unadopt()
			return nil, err
		}
		c.ended[d] = st.Ended
	}
	if r.ServerName != "" || r.Route != "" {
		c.adoptRoute(r.ServerName, r.Route)
	}
	if v := r.Verdict; v != nil {
		c.settle = p.Resume(be, v.Force, v.Generation)
		c.early = &earlyWatch{}
		c.early.timer.OnFire(func(int64) { c.settle.Settle(dialer.Success) })
		c.early.left = v.Left
	}
	if err := c.watch(); err != nil {
		c.unadopt()
		return nil, err
	}
	return &Adopted{c}, nil
}

// unadopt gives back what a failed adoption took of its streams: their
// pipes' places in the pool (the descriptors are still the caller's).
func (c *conn) unadopt() {
	for d := range 2 {
		c.streams[d].Detach(c.l.scratch)
	}
}

// AdoptQueued is AdoptRelay for a client waiting for a slot of pool p.
func (l *Loop) AdoptQueued(q *flow.Queued, b *flow.Batch, f *Front, p *pool.Pool) (*Adopted, error) {
	src, dst, err := parseAddrs(q.Client, q.Dst)
	if err != nil {
		return nil, err
	}
	clfd, ok := b.FD(q.ClientFD)
	if !ok || clfd < 0 {
		return nil, fmt.Errorf("%w: queued client %s without its socket", ErrAdoptRecord, q.Client)
	}
	c := l.newAdopted(f, p, src, dst, q.Sourced, q.Age)
	c.queuedAt = -q.Waited // from Go's now
	if q.Budgeted || q.Forced {
		c.spent = &spentBudget{left: max(0, q.BudgetLeft), budgeted: q.Budgeted, forced: q.Forced}
	}
	if q.ServerName != "" || q.Route != "" {
		c.adoptRoute(q.ServerName, q.Route)
	}
	c.cl.fd = clfd
	c.cl.setState(q.ClientEnd)
	if err := c.watch(); err != nil {
		return nil, err
	}
	return &Adopted{c}, nil
}

// routeRecord is a routed client's server name and route name for its
// record ("" and "" for any other client).
func (c *conn) routeRecord() (serverName, route string) {
	r := c.sni
	if r == nil {
		return "", ""
	}
	if r.route != nil {
		route = r.route.Name
	}
	return r.serverName, route
}

// adoptRoute gives an adopted client the server name it asked for and its
// route, found by name among the listener's routes here (none of that
// name, or no routes now: the listener's pool's client, by name still).
// Its route counted it where it was inspected.
func (c *conn) adoptRoute(serverName, route string) {
	rt := c.f.Routing()
	c.sni = c.l.routes.get()
	c.sni.rt, c.sni.serverName = rt, serverName
	if rt == nil || route == "" {
		return
	}
	for _, r := range rt.Routes {
		if r.Name == route {
			c.sni.route = r
			return
		}
	}
}

func parseAddrs(client, dst string) (src, d netip.AddrPort, err error) {
	if src, err = netip.ParseAddrPort(client); err != nil {
		return src, d, fmt.Errorf("%w: client %q: %v", ErrAdoptRecord, client, err)
	}
	if dst != "" {
		if d, err = netip.ParseAddrPort(dst); err != nil {
			return src, d, fmt.Errorf("%w: destination %q: %v", ErrAdoptRecord, dst, err)
		}
	}
	return src, d, nil
}

func (l *Loop) newAdopted(f *Front, p *pool.Pool, src, dst netip.AddrPort, sourced bool, age int64) *conn {
	c := &conn{l: l, f: f, pool: p, src: src, dst: dst, policy: f.Policy(), phase: phaseAdopting, born: -age}
	c.sourced = sourced && c.policy != nil && c.policy.Sources != nil
	c.cl = endpoint{c: c, fd: -1, client: true}
	c.be = endpoint{c: c, fd: -1}
	c.timer.FireTo(c)
	return c
}

func (e *endpoint) setState(s flow.End) {
	e.peerDone, e.hup, e.urgent = s.PeerDone, s.HangUp, s.Urgent
	// Whatever happened since the old process's last look raised edges
	// this loop never saw: try every way once, EAGAIN clears what is not so.
	e.readable, e.writable = true, true
}

// watch registers the adopted connection's sockets and puts it on the
// loop's list, still held: its events are remembered, not acted on.
func (c *conn) watch() error {
	l := c.l
	// The client as at accept (conn.go): taken as writable (setState)
	// until a write says EAGAIN, watched for writing only from then.
	c.cl.writesUnwatched = true
	if err := l.r.Register(c.cl.fd, &c.cl, reactor.ReadSocketEvents); err != nil {
		return err
	}
	if c.be.fd >= 0 {
		if err := l.r.Register(c.be.fd, &c.be, reactor.SocketEvents); err != nil {
			l.r.Unwatch(c.cl.fd)
			l.r.Forget(c.cl.fd)
			return err
		}
	}
	l.held.add(c)
	return nil
}

// Go lets an adopted connection run: it counts from now where the old
// process's did (the server's, its backend's, its source's), its timers go
// on from what was left, and it relays (or waits for its slot) at once.
// On the loop.
func (a *Adopted) Go() {
	c := a.c
	if c.phase != phaseAdopting {
		return // closed while held (the loop stopped)
	}
	l := c.l
	now := l.r.Clock()
	c.born += now
	l.nconns.Add(1)
	l.sh.Active.Add(1) // above max_connections if need be: it is open already
	c.f.HandedIn.Add(1)
	if c.sourced {
		c.policy.Sources.Hold(c.src.Addr())
	}
	if c.backend == nil {
		c.queuedAt += now
		c.phase = phaseDialing // queueForSlot queues it, keeping its deadline
		if c.cl.hup {
			c.clientLeftMidDial() // it left while it moved: no dial for it
			return
		}
		c.queueForSlot()
		l.armQueueRetry(now)
		return
	}
	cut := c.pool.Adopt(c.backend)
	c.recordOwnDial(c.backend.AddrPort)
	if c.early != nil {
		l.r.Arm(&c.early.timer, now+c.early.left)
	}
	c.lastActive += now
	c.phase = phaseRelaying
	c.served = true // the old process counted it ok
	l.r.Arm(&c.timer, c.lastActive+int64(c.pool.IdleTimeout()))
	if q := l.accessFor(c.f); q != nil {
		// Its connect record is the old process's; its interim records go
		// on from here, the first an interval after the hand-over.
		c.listInterim(q)
	}
	if cut {
		// Its backend's drain deadline passed while it moved: cut now,
		// whole, as the drain would have.
		c.close(CloseDrained, true, true)
		return
	}
	// A hang-up seen while it was held: on a direction still open the
	// next read reports it; on one that has ended, only this look does.
	for _, e := range []*endpoint{&c.cl, &c.be} {
		if e.hup {
			c.checkHangUp(e)
			if c.phase != phaseRelaying {
				return
			}
		}
	}
	c.queued = true
	l.r.MarkReady(c)
}
