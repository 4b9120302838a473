package relay

// How a connection ends: close, the one way out (every phase ends here),
// and the refusals and resets that call it with their reason (access.go).

import (
	"context"
	"log/slog"

	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/splice"
)

// close ends the connection for the reason why: its timers, a dial or a
// queue wait still open, its pipes and buffers; it is counted by reason
// and handed to the access log before its sockets close (reset where
// asked); then its count on the backend and an early reset verdict go.
func (c *conn) close(why CloseReason, resetClient, resetBackend bool) {
	if c.phase == phaseClosed {
		return
	}
	if c.phase == phaseAdopting {
		c.dropAdopted()
		return
	}
	o := why.outcome()
	relaying := c.phase == phaseRelaying
	c.phase = phaseClosed
	l := c.l
	c.disarm()
	midDial := c.dial != nil && c.be.fd >= 0
	if midDial {
		c.pool.EndDial(c.dial.cur, dialer.Local) // cut mid-dial: no evidence
	}
	if c.waiting {
		c.leaveQueue(queueLeft)
	}
	if c.dial != nil {
		c.dial.endWait(c.f, queueLeft) // it waited for recovery, then went while dialing
		l.dials.put(c.dial)
	}
	c.dial = nil
	c.streams[0].Release(l.scratch)
	c.streams[1].Release(l.scratch)
	// Counted (and logged) before the sockets close: a client that sees
	// its FIN or reset finds itself in l4lb_client_connections_closed_total.
	c.record(why, relaying)
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
	c.unlist()
}

// disarm stops the connection's timers.
func (c *conn) disarm() {
	c.l.r.Disarm(&c.timer)
	if c.early != nil {
		c.l.r.Disarm(&c.early.timer)
	}
}

// unlist takes the connection off its loop and out of the counts of open
// ones.
func (c *conn) unlist() {
	if c.sni != nil {
		c.l.routes.put(c.sni) // its record, if any, is written
		c.sni = nil
	}
	c.l.held.remove(c)
	c.l.interim.Remove(&c.interimAt)
	c.l.nconns.Add(-1)
	c.l.sh.Active.Add(-1)
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

// cut ends the connection at once with a reset on both sides (shutdown
// deadline, loop stop): o is splice.Aborted, the one way a connection is
// cut from outside, which ends it as CloseShutdown.
func (c *conn) cut(o splice.Outcome) {
	if c.phase != phaseRelaying && c.phase != phaseClosed && c.phase != phaseAdopting {
		// Never relayed (dialing, queued for a slot, reading its PROXY
		// header): a refused client, so the results add up to the closes.
		c.f.Rejected.Add(1)
	}
	c.close(CloseShutdown, true, true)
}

// noBackend ends a client for which no backend could be dialed.
func (c *conn) noBackend(err error) {
	c.f.Failed.Add(1)
	if c.f.OnNoBackend != nil {
		c.f.OnNoBackend(c.pool.Name)
	}
	c.debug("client not served", err)
	c.close(CloseNoBackend, false, false)
}

// refuse ends a client that local trouble kept from being served (no
// backend is blamed).
func (c *conn) refuse(err error) {
	c.f.Rejected.Add(1)
	if c.f.OnLocalError != nil {
		c.f.OnLocalError(c.pool.Name)
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
		c.f.OnLoop(c.pool.Name)
	}
	c.close(CloseLoop, true, true)
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

// broken ends the connection after a socket error on e: that end is gone,
// and the other is reset so its peer learns the stream broke, not that it
// ended.
func (c *conn) broken(e *endpoint, err error) {
	if e.client {
		c.close(CloseClientReset, false, true)
	} else {
		c.close(CloseBackendReset, true, false)
	}
}

// refuseBy ends a client the policy refused: counted as rejected, by
// reason; reset where the peer must not think it was heard.
func (c *conn) refuseBy(why CloseReason, reset bool) {
	c.f.Rejected.Add(1)
	c.close(why, reset, false)
}

// forgetOwnDial drops the record recordOwnDial made (loop detection), as
// the backend connection closes.
func (c *conn) forgetOwnDial() {
	if c.owned {
		c.l.sh.Guard.Remove(c.own)
		c.owned = false
	}
}

// dropAdopted closes this process's descriptors of a connection adopted
// from another process that never went (the loop stopped first): nothing
// of it was counted here, and the other process may still hold the same
// sockets (it was not told this one has them), so no reset: SO_LINGER
// would stay on the socket and turn that process's own close into one.
func (c *conn) dropAdopted() {
	l := c.l
	c.phase = phaseClosed
	c.streams[0].Release(l.scratch)
	c.streams[1].Release(l.scratch)
	closeEnd(l, &c.cl, false)
	closeEnd(l, &c.be, false)
	l.held.remove(c)
}
