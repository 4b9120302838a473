package relay

import (
	"errors"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/loopguard"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// dialState is a connection's walk through its candidates; it lives only
// while dialing, so an established connection does not carry it.
type dialState struct {
	cands   [pool.MaxCandidates]int
	n, next int
	force   bool
	forced  bool // a force-try was made: the one rule 6 allows this client
	// forceBusy: the force-try target had another client's in flight
	// (pool.TryBeginForce), so this client waits for its turn.
	forceBusy bool
	waited    bool  // it waits, or waited, for recovery (recovery.go): its end is counted once
	deadline  int64 // the pool's connect budget, on the loop's clock
	budgeted  bool  // deadline is set: a connect(2) was made
	cur       pool.Dial
	started   int64 // the current dial's connect(2), on the loop's clock
	cut       bool  // the current dial got less than connect_timeout
	full      bool  // a candidate was skipped for want of a slot
	portsOut  error // a candidate had no local port left (EADDRNOTAVAIL)
	last      error
}

// startDial plans the candidates (or the one force-try) and dials the
// first.
// A client back from the slot queue dials on with what it had spent
// before it (queueForSlot keeps it): connect_budget is all of one
// client's attempts together.
func (c *conn) startDial() {
	d := c.l.dials.get()
	if s := c.spent; s != nil {
		c.spent = nil
		d.forced = s.forced
		if s.budgeted {
			d.budgeted, d.deadline = true, c.l.r.Clock()+s.left
		}
	}
	c.plan(d)
}

// spentBudget is what a client leaving for the slot queue had spent of
// its connect budget: the time left (the budget stands still while it
// waits for a slot, which queue_timeout bounds), and whether it made its
// one force-try (rule 6).
type spentBudget struct {
	left     int64
	budgeted bool
	forced   bool
}

// plan lists the candidates for d and dials the first. d is fresh, or
// carries what a client back from waiting for recovery spent: its connect
// budget and its force-try.
func (c *conn) plan(d *dialState) {
	key := c.src
	if c.sni != nil {
		key = c.pool.KeyFor(c.src, c.sni.serverName) // hash_key = "sni"
	}
	cands, force := c.pool.Plan(key, d.cands[:0])
	switch {
	case len(cands) == 0 && !force:
		d.endWait(c.f, queueServed) // back, but full: it waits for a slot now
		c.dial = d                  // for queueForSlot to keep what it spent of its budget
		c.queueForSlot()            // every usable backend is at its max_connections
		return
	case force && d.forced:
		// All down again before this client's turn came: it had its one
		// force-try (rule 6), so it waits on, within its budget.
		c.dial = d
		c.awaitRecovery()
		return
	}
	d.n, d.next, d.force = len(cands), 0, force
	d.full, d.portsOut = false, nil
	c.dial = d
	c.phase = phaseDialing
	c.tryNext()
}

// tryNext starts a non-blocking connect to the next candidate that may
// still be tried, or ends the client when none is left.
func (c *conn) tryNext() {
	d, p := c.dial, c.pool
	for d.next < d.n {
		b := p.At(d.cands[d.next])
		d.next++
		if d.next > 1 {
			// After a failed dial a later candidate may have tripped
			// meanwhile (open means no client dial), and the budget may
			// be spent.
			if !b.Usable() {
				continue
			}
			if d.budgeted && c.l.r.Clock() >= d.deadline {
				d.last = pool.ErrBudget
				break
			}
		}
		var cur pool.Dial
		var ok bool
		if d.force {
			if cur, ok = p.TryBeginForce(b); !ok {
				d.forceBusy = true // another client's force-try is in flight
				continue
			}
			d.forced = true
		} else if cur, ok = p.TryBeginDial(b, false); !ok {
			d.full = true // another loop took its last slot since the plan
			continue
		}
		// cur holds the generation, captured before connect(2).
		d.cur = cur
		d.started = c.l.r.Clock()
		if !d.budgeted {
			// From the first connect(2): that dial gets its full
			// connect_timeout (connect_budget >= connect_timeout), so its
			// timeout is never taken for one the budget cut short.
			d.budgeted, d.deadline = true, d.started+int64(p.ConnectBudget())
		}
		c.l.srcNext++
		fd, err := connectTo(b.AddrPort, p.Keepalive(), p.SourcesFor(b.AddrPort), int(c.l.srcNext))
		if fd >= 0 {
			c.be = endpoint{c: c, fd: fd}
			if rerr := c.l.r.Register(fd, &c.be, reactor.SocketEvents); rerr != nil {
				rawsys.Close(fd)
				c.be.fd = -1
				p.EndDial(d.cur, dialer.Local)
				c.refuse(rerr)
				return
			}
			c.recordOwnDial(b.AddrPort)
			now := d.started // connect(2) took microseconds
			timeout, left := int64(p.ConnectTimeout()), d.deadline-now
			d.cut = left < timeout
			c.l.r.Arm(&c.timer, now+min(timeout, max(left, 0)))
			return // writable (or an error) says how it went
		}
		o := dialer.Classify(err)
		p.EndDial(d.cur, o)
		if err == unix.EADDRNOTAVAIL {
			// Ports run out per destination: this backend has none left
			// from any source, the next candidate may. Local trouble
			// either way: no backend is blamed.
			p.PortsExhausted()
			d.portsOut = &dialer.DialError{Backend: b.Addr, Err: err}
			continue
		}
		if o == dialer.Local {
			c.refuse(&dialer.DialError{Backend: b.Addr, Err: err})
			return
		}
		d.last = &dialer.DialError{Backend: b.Addr, Err: err}
	}
	if d.full && d.last == nil {
		c.queueForSlot()
		return
	}
	if d.portsOut != nil && d.last == nil {
		c.refuse(d.portsOut) // every candidate tried was out of local ports
		return
	}
	c.awaitRecovery()
}

// connectDone reads the result of the connect in flight. Writable with no
// error reported is a connect that succeeded: SO_ERROR is read only when
// epoll reported an error, one syscall fewer per connection.
func (c *conn) connectDone() {
	if !c.be.hup {
		c.l.r.Disarm(&c.timer)
		c.connected(true)
		return
	}
	err := rawsys.SoError(c.be.fd)
	switch err {
	case unix.ECONNRESET, unix.EPIPE, nil:
		// The handshake completed (a reset in SYN_SENT reads as
		// ECONNREFUSED): the backend accepted, then reset or hung up
		// before the loop looked. The connect worked; what came after is
		// the relay's to judge (count_early_reset decides whether it is a
		// failed dial), and the client must see the reset. The pending
		// error is consumed now, so later reads end in a clean EOF: relay
		// what the backend sent before it, then reset.
		if err == nil {
			err = unix.ECONNRESET
		}
		c.l.r.Disarm(&c.timer)
		c.connected(false)
		if c.phase == phaseRelaying {
			c.salvage(1)
			c.broken(&c.be, err)
		}
	default:
		c.dialFailed(err)
	}
}

// dialFailed ends the connect in flight (refused, reset, timed out) and
// moves on to the next candidate.
func (c *conn) dialFailed(err error) {
	d, p := c.dial, c.pool
	c.l.r.Disarm(&c.timer)
	c.forgetOwnDial()
	closeEnd(c.l, &c.be, false)
	derr := &dialer.DialError{Backend: d.cur.Backend.Addr, Err: err}
	o := dialer.Classify(derr)
	switch {
	case o == dialer.Failure && d.cut && dialer.IsTimeout(err):
		// The budget cut this dial short: the backend did not get its
		// full connect_timeout, so its timeout proves nothing.
		p.EndDial(d.cur, dialer.Local)
		d.last = errors.Join(pool.ErrBudget, derr)
	case o == dialer.Local:
		p.EndDial(d.cur, o)
		c.refuse(derr)
		return
	default:
		p.EndDial(d.cur, o)
		d.last = derr
	}
	c.tryNext()
}

// clientLeftMidDial calls off the dial of a client that reset: local
// trouble, no backend blamed (docs/breaker.md, "Local trouble vs backend
// failure").
func (c *conn) clientLeftMidDial() {
	c.f.Rejected.Add(1)
	c.debug("client left while its backend was being dialed", unix.ECONNRESET)
	c.close(CloseClientLeft, false, false) // close ends the dial as local
}

// connected starts relaying once the backend accepted; pump moves what is
// already waiting.
func (c *conn) connected(pump bool) {
	d, p := c.dial, c.pool
	d.endWait(c.f, queueServed)
	c.dial = nil
	c.backend = d.cur.Backend
	c.settle = p.Pending(d.cur)
	if c.settle != nil {
		c.early = &earlyWatch{}
		c.early.timer.OnFire(func(int64) { c.settle.Settle(dialer.Success) })
		c.l.r.Arm(&c.early.timer, c.l.r.Clock()+int64(p.EarlyResetWindow()))
	}
	c.phase = phaseRelaying
	c.lastActive = c.l.r.Clock()
	c.backend.ObserveConnect(time.Duration(c.lastActive - d.started))
	c.l.dials.put(d)
	c.l.r.Arm(&c.timer, c.lastActive+int64(p.IdleTimeout()))
	// A connect found reset (pump false) is the relay's to end as a
	// backend reset: no header goes to a socket that is gone. The client
	// counts as ok only once its header is written: sendProxyHeader
	// counts it when it ends the connection.
	if v := p.ProxyProtocol(); v != 0 && pump && !c.sendProxyHeader(v) {
		return
	}
	c.opened()
	if pump {
		c.pump()
	}
}

// recordOwnDial notes a dial to a local backend by both its ends, right
// after connect(2) gave it its source port: were the backend one of
// l4lb's own listeners, the connection it accepts is recognised and never
// dialed onwards. On loopback the handshake completes inside connect(2),
// so with several loops another loop may accept that connection before
// this record exists and let one hop through; the next hop is caught.
func (c *conn) recordOwnDial(backend netip.AddrPort) {
	if !c.l.sh.Guard.MayLoop(backend) {
		return
	}
	if local, err := rawsys.Getsockname(c.be.fd); err == nil {
		c.own, c.owned = loopguard.Conn{Local: local, Remote: backend}, true
		c.l.sh.Guard.Add(c.own)
	}
}
