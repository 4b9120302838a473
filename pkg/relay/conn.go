package relay

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/accesslog"
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
	// phaseAdopting: handed over by another process and held still until
	// it knows this one has it (handover.go); nothing counted yet.
	phaseAdopting
	phaseInspect // waiting for the client's TLS ClientHello (inspect.go)
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
	// writesUnwatched: registered for reading only (a client:
	// reactor.ReadSocketEvents), so taken as writable until a write says
	// EAGAIN, which asks for EPOLLOUT from then on (watchWrites).
	writesUnwatched bool
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
	served  bool // counted ok (opened): its record keeps backend and bytes whatever ends it

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
	// stays: adopted back after a hand-over failed for it; never detached
	// again.
	stays bool

	// Loop detection: the backend connection's ends, recorded while it
	// exists when the backend is a local address.
	own   loopguard.Conn
	owned bool

	policy   *Policy        // the listener's when the client was accepted
	sourced  bool           // counted by policy.Sources until close
	dst      netip.AddrPort // what the client connected to, from its PROXY header; invalid: ask the socket
	waiting  bool           // on the loop's queue: for a backend slot, or for recovery (recovery.go)
	sni      *routed        // a routed listener's client: its route and server name (inspect.go)
	spent    *spentBudget   // waiting for a slot: what it had spent of its connect budget (dial.go)
	queuedAt int64          // when it began waiting, on the loop's clock

	prev, next *conn // the loop's connList
	// interimAt is its place in the loop's schedule of interim access
	// records (listed while relaying with access_interval on).
	interimAt accesslog.Entry[*conn]
}

// earlyWatch settles a count_early_reset dial as a success when the
// backend stays silent for the pool's early_reset_window.
type earlyWatch struct {
	timer reactor.Timer
	left  int64 // adopted in a hand-over: the window left, armed at Go
}

// accepted takes a new client connection from a listener of this loop.
func (l *Loop) accepted(fd int, src netip.AddrPort, f *Front) {
	if limit := l.sh.Cap(); l.sh.Active.Add(1)+limit.Elsewhere > limit.Max {
		l.sh.Active.Add(-1)
		f.Rejected.Add(1)
		// Counted before the close: a client that sees its reset finds
		// itself counted.
		l.refusedAtAccept(f, src, CloseConnectionCap)
		rawsys.Close(fd)
		if l.sh.OnCap != nil {
			l.sh.OnCap()
		}
		return
	}
	// TCP_NODELAY is inherited from the listening socket (listener.Bind).
	c := &conn{l: l, f: f, pool: f.Pool(), src: src, born: l.r.Now()}
	// A client is written to only once its backend answers, and mostly
	// never fills: it is watched for writing only from its first EAGAIN.
	c.cl = endpoint{c: c, fd: fd, client: true, writable: true, writesUnwatched: true}
	c.be = endpoint{c: c, fd: -1}
	c.timer.FireTo(c)
	if err := l.r.Register(fd, &c.cl, reactor.ReadSocketEvents); err != nil {
		l.sh.Active.Add(-1)
		f.Rejected.Add(1)
		l.refusedAtAccept(f, src, CloseLocalError)
		rawsys.Close(fd)
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
	case phaseInspect:
		c.inspect(c.sni.rt)
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

// Fire is c.timer's (reactor.Firer): whichever of the phase's deadlines
// it was armed for has come.
func (c *conn) Fire(now int64) {
	switch c.phase {
	case phaseProxy:
		c.refuseBy(CloseProxyTimeout, true)
	case phaseInspect:
		c.inspectTimedOut(c.sni.rt)
	case phaseQueued:
		if c.dial != nil {
			c.recoveryBudgetSpent()
			return
		}
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
