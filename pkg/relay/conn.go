package relay

import (
	"context"
	"log/slog"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/loopguard"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/reactor"
	"github.com/l4lb/l4lb/pkg/splice"
)

// phase is where a connection is in its life.
type phase uint8

const (
	phaseDialing phase = iota + 1
	phaseRelaying
	phaseClosed
	phaseProxy  // reading the client's PROXY header (accept_proxy)
	phaseQueued // waiting for a backend slot (queue_timeout)
)

// endpoint is one socket of a connection with the readiness the loop
// remembers for it (edge-triggered: set by events, cleared by EAGAIN).
type endpoint struct {
	c        *conn
	fd       int
	client   bool
	readable bool
	writable bool
	hup      bool // error or hang-up reported: the socket may be dead
	// peerDone: the peer's FIN, a reset or an error was reported. Reads
	// no longer block (they return bytes, the error, or 0), so a short
	// read does not end readability: the FIN's edge came with the bytes
	// before it and will not come again.
	peerDone bool
	// urgent: the peer sent TCP urgent data (EPOLLPRI); the stream reading
	// from this socket copies from then on.
	urgent bool
}

func (e *endpoint) Event(ev uint32) {
	if ev&(unix.EPOLLIN|unix.EPOLLPRI|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.readable = true
	}
	if ev&unix.EPOLLPRI != 0 {
		e.urgent = true
	}
	if ev&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.writable = true
	}
	if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.hup = true
	}
	if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		e.peerDone = true
		e.c.l.r.Churn()
	} else if e.c.phase != phaseRelaying {
		e.c.l.r.Churn() // not relaying yet: dialing, queued for a slot, or reading a PROXY header
	}
	e.c.event(e)
}

// conn is one client connection and, once dialed, its backend connection.
// Everything about it runs on its loop's goroutine.
type conn struct {
	l   *Loop
	f   *Front
	src netip.AddrPort

	cl, be  endpoint
	phase   phase
	streams [2]splice.Stream // 0: client to backend, 1: backend to client
	ended   [2]bool
	queued  bool // on the loop's ready list

	timer      reactor.Timer // connect timeout while dialing, idle timeout after, then the linger
	lastActive int64
	// lingerUntil: both directions ended, the backend's first, and the
	// loop waits until then for the backend to take or reset the client's
	// last bytes (latereset.go); lingerStep is the next look's delay.
	lingerUntil, lingerStep int64
	born                    int64  // the accepting turn's l.r.Now(): the access log's duration
	outq                    [2]int // send queues at the last idle check

	pool    *pool.Pool // the listener's pool when the client was accepted
	dial    *dialState // while dialing
	backend *pool.Backend
	settle  *pool.Settlement // count_early_reset: the dial's result is still open
	early   *earlyWatch

	// Loop detection: the backend connection's ends, recorded while it
	// exists when the backend is a local address.
	own   loopguard.Conn
	owned bool

	policy   *Policy        // the listener's when the client was accepted
	sourced  bool           // counted by policy.Sources until close
	dst      netip.AddrPort // what the client connected to, from its PROXY header; invalid: ask the socket
	waiting  bool           // on the loop's queue for a backend slot
	queuedAt int64          // when it began waiting, on the loop's clock

	prev, next *conn // the loop's connList
}

// earlyWatch settles a count_early_reset dial as a success when the
// backend stays silent for the pool's early_reset_window.
type earlyWatch struct {
	timer reactor.Timer
}

// accepted takes a new client connection from a listener of this loop.
func (l *Loop) accepted(fd int, src netip.AddrPort, f *Front) {
	if l.sh.Active.Add(1) > l.sh.Max.Load() {
		l.sh.Active.Add(-1)
		f.Rejected.Add(1)
		rawsys.Close(fd)
		l.refusedAtAccept(f, src, CloseConnectionCap)
		if l.sh.OnCap != nil {
			l.sh.OnCap()
		}
		return
	}
	// TCP_NODELAY is inherited from the listening socket (listener.Bind).
	c := &conn{l: l, f: f, pool: f.Pool(), src: src, born: l.r.Now()}
	c.cl = endpoint{c: c, fd: fd, client: true}
	c.be = endpoint{c: c, fd: -1}
	c.timer.OnFire(c.onTimer)
	if err := l.r.Register(fd, &c.cl, reactor.SocketEvents); err != nil {
		l.sh.Active.Add(-1)
		f.Rejected.Add(1)
		rawsys.Close(fd)
		l.refusedAtAccept(f, src, CloseLocalError)
		l.sh.Log.Warn("client refused: cannot watch its socket", "listener", f.Name, "error", err)
		return
	}
	l.held.add(c)
	l.nconns.Add(1)
	if g := l.sh.Guard; g.Active() && g.Local(src.Addr()) {
		// Only a local client can be one of l4lb's own dials, and only
		// while such dials exist.
		if local, err := rawsys.Getsockname(fd); err == nil && g.Has(loopguard.Conn{Local: src, Remote: local}) {
			c.loopCut()
			return
		}
	}
	c.begin()
}

func (c *conn) event(e *endpoint) {
	switch c.phase {
	case phaseProxy:
		c.readProxyHeader()
	case phaseQueued:
		if e.hup {
			c.leaveQueue(queueLeft)
			c.clientLeftMidDial()
		}
	case phaseDialing:
		if e.client {
			if e.hup {
				// A reset (or a socket closed both ways) while the dial is
				// in flight: the client is gone, the dial proves nothing.
				c.clientLeftMidDial()
			}
			// Data or a FIN from the client waits in the kernel until the
			// backend is connected.
			return
		}
		if e.writable {
			c.connectDone()
		}
	case phaseRelaying:
		if e.hup {
			c.checkHangUp(e)
			if c.phase != phaseRelaying {
				return
			}
		}
		c.pump()
	}
}

func (c *conn) Resume() {
	c.queued = false
	c.pump()
}

// checkHangUp looks at an endpoint that reported an error or hang-up: if
// the direction reading from it has already ended, no read will ever see
// its error, so ask for it here.
func (c *conn) checkHangUp(e *endpoint) {
	d := 0
	if !e.client {
		d = 1
	}
	if !c.ended[d] {
		return // the next read reports it
	}
	if err := rawsys.SoError(e.fd); err != nil {
		c.broken(e, err)
	}
}

func (c *conn) onTimer(now int64) {
	switch c.phase {
	case phaseProxy:
		c.refuseBy(CloseProxyTimeout, true)
	case phaseQueued:
		c.leaveQueue(queueTimeout)
		c.refuseBy(CloseBackendCap, false)
	case phaseDialing:
		c.dialFailed(unix.ETIMEDOUT)
	case phaseRelaying:
		if c.lingerUntil != 0 {
			c.checkLinger(now)
			return
		}
		c.checkIdle(now)
	}
}

// noBackend ends a client for which no backend could be dialed.
func (c *conn) noBackend(err error) {
	c.f.Failed.Add(1)
	if c.f.OnNoBackend != nil {
		c.f.OnNoBackend()
	}
	c.debug("client not served", err)
	c.close(CloseNoBackend, false, false)
}

// refuse ends a client that local trouble kept from being served (no
// backend is blamed).
func (c *conn) refuse(err error) {
	c.f.Rejected.Add(1)
	if c.f.OnLocalError != nil {
		c.f.OnLocalError()
	}
	c.debug("client refused: local trouble", err)
	c.close(CloseLocalError, false, false)
}

// loopCut resets a client that is l4lb's own backend connection, which
// ends the loop at this hop.
func (c *conn) loopCut() {
	c.f.Rejected.Add(1)
	c.f.Loops.Add(1)
	if c.f.OnLoop != nil {
		c.f.OnLoop()
	}
	c.close(CloseLoop, true, true)
}

// cut ends the connection at once with a reset on both sides (shutdown
// deadline, loop stop): o is splice.Aborted, the one way a connection is
// cut from outside, which ends it as CloseShutdown.
func (c *conn) cut(o splice.Outcome) {
	if c.phase != phaseRelaying && c.phase != phaseClosed {
		// Never relayed (dialing, queued for a slot, reading its PROXY
		// header): a refused client, so the results add up to the closes.
		c.f.Rejected.Add(1)
	}
	c.close(CloseShutdown, true, true)
}

// close ends the connection for the reason why: both sockets (reset where
// asked), its timers, its pipes and buffers, its count on the backend, and
// a dial or an early reset verdict still open; then counts it by reason
// and hands it to the access log.
func (c *conn) close(why CloseReason, resetClient, resetBackend bool) {
	if c.phase == phaseClosed {
		return
	}
	o := why.outcome()
	relaying := c.phase == phaseRelaying
	c.phase = phaseClosed
	l := c.l
	l.r.Disarm(&c.timer)
	if c.early != nil {
		l.r.Disarm(&c.early.timer)
	}
	midDial := c.dial != nil && c.be.fd >= 0
	if midDial {
		c.pool.EndDial(c.dial.cur, dialer.Local) // cut mid-dial: no evidence
	}
	c.dial = nil
	c.streams[0].Release(l.scratch)
	c.streams[1].Release(l.scratch)
	closeEnd(l, &c.cl, resetClient)
	// A dial called off mid-way is reset: were its SYN already accepted
	// somewhere, the far end must see it gone, not a quiet client.
	closeEnd(l, &c.be, resetBackend || midDial)
	c.forgetOwnDial()
	if relaying {
		if c.settle != nil {
			v := dialer.Success
			switch {
			case o == splice.Aborted:
				v = dialer.Local // cut from outside: no evidence either way
			case o == splice.BackendReset && c.streams[1].Delivered == 0:
				v = dialer.Failure // reset before its first byte
			}
			c.settle.Settle(v)
		}
		c.pool.EndRelay(c.backend)
		l.slotFreed()
		if o == splice.ClientReset || o == splice.BackendReset {
			c.debugRelay(o)
		}
	}
	if c.sourced {
		c.policy.Sources.Release(c.src.Addr())
	}
	if c.waiting {
		c.leaveQueue(queueLeft)
	}
	c.record(why, relaying)
	l.held.remove(c)
	l.nconns.Add(-1)
	l.sh.Active.Add(-1)
}

func closeEnd(l *Loop, e *endpoint, reset bool) {
	if e.fd < 0 {
		return
	}
	l.r.Forget(e.fd)
	if reset {
		rawsys.ResetClose(e.fd)
	} else {
		rawsys.Close(e.fd)
	}
	e.fd = -1
}

func (c *conn) debug(msg string, err error) {
	if log := c.l.sh.Log; log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug(msg, "listener", c.f.Name, "client", c.src.String(), "error", err)
	}
}

func (c *conn) debugRelay(o splice.Outcome) {
	if log := c.l.sh.Log; log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug("relay reset", "listener", c.f.Name, "client", c.src.String(),
			"backend", c.backend.Addr, "outcome", o.String())
	}
}
