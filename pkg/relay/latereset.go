package relay

import (
	"time"

	"github.com/l4lb/l4lb/pkg/rawsys"
)

// A backend that closes at once (a FIN, nothing unread) resets whatever
// reaches it later: its kernel answers bytes for a closed socket with a
// reset, not an ACK. Bytes the client sends after the backend's end are
// still relayed, and while the client has not finished, the reset comes
// back as an error on the backend's socket and is passed on (checkHangUp).
// But when the client's FIN comes with those bytes, both directions end
// in the turn that writes them, before the reset can come back: closed at
// once, the connection would count as completed. So a connection whose
// backend finished first, and which wrote bytes to it that it has not
// acknowledged yet, lingers on the backend's side: it sends its FIN and
// waits, at most backendLinger, for the backend to acknowledge everything
// (completed) or reset (backend-reset, and the client is reset too where
// that can still reach it). The client's own socket cannot learn of it:
// its FIN was acknowledged by this host's kernel before the reset came
// back, as a direct connection's would not have been (docs/architecture.md,
// "How a client ends").

// backendLinger bounds the wait: beyond a few round trips a reset is
// unlikely to come, and the client has already seen its end.
const backendLinger = 200 * time.Millisecond

// lingerFirstCheck is the first look at the backend's socket; the
// looks double from it (SIOCOUTQ raises no event when it drains).
const lingerFirstCheck = time.Millisecond

// lingerOnBackend starts the linger when the client's direction ended last
// and the backend has not acknowledged all it was sent; false: close now.
// It may end the connection itself (a reset already there).
func (c *conn) lingerOnBackend() bool {
	if !c.lingerNeeded() {
		return false
	}
	if c.phase == phaseClosed {
		return true // a reset was already there: ended as the backend's
	}
	rawsys.ShutdownWrite(c.be.fd) // the FIN the close would send; its ACK ends the wait
	c.lingerUntil = c.l.r.Now() + int64(backendLinger)
	c.lingerStep = int64(lingerFirstCheck)
	c.l.r.Arm(&c.timer, c.l.r.Now()+c.lingerStep)
	return true
}

// lingerNeeded reports whether the backend may still reset bytes it was
// sent; a reset already there ends the connection as the backend's.
func (c *conn) lingerNeeded() bool {
	if err := rawsys.SoError(c.be.fd); err != nil {
		c.broken(&c.be, err)
		return true
	}
	return rawsys.Unacked(c.be.fd) > 0
}

// checkLinger runs on the linger's timer.
func (c *conn) checkLinger(now int64) {
	if err := rawsys.SoError(c.be.fd); err != nil {
		c.broken(&c.be, err)
		return
	}
	if rawsys.Unacked(c.be.fd) == 0 || now >= c.lingerUntil {
		// Acknowledged; or no answer in time, which a client could not
		// tell from a clean end either.
		c.close(CloseCompleted, false, false)
		return
	}
	c.lingerStep *= 2
	c.l.r.Arm(&c.timer, min(now+c.lingerStep, c.lingerUntil))
}
