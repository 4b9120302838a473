package relay

import (
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/splice"
)

// moveBudget is how many bytes a direction moves per turn before the
// connection yields to the loop's other work (fairness).
const moveBudget = 256 << 10

// pump moves bytes both ways as far as readiness allows.
func (c *conn) pump() {
	if c.phase != phaseRelaying {
		return
	}
	sc := c.l.scratch
	firstBefore := c.streams[1].Delivered
	progress, more := false, false
	for d := range 2 {
		if c.ended[d] {
			continue
		}
		src, dst := &c.cl, &c.be
		if d == 1 {
			src, dst = dst, src
		}
		s := &c.streams[d]
		s.Urgent = s.Urgent || src.urgent
		s.PeerDone = src.peerDone
		before := s.Delivered
		st, err := s.Move(src.fd, dst.fd, &src.readable, &dst.writable, moveBudget, sc)
		if n := s.Delivered - before; n > 0 {
			progress = true
			if d == 0 {
				c.backend.Meter.ToBackend.Add(n)
			} else {
				c.backend.Meter.ToClient.Add(n)
			}
		}
		if !dst.writable && dst.writesUnwatched && !c.watchWrites(dst) {
			return
		}
		switch st {
		case splice.Ended:
			if src.hup {
				// A FIN followed by a reset: every read after the FIN
				// returns EOF, and the reset is only in the pending
				// error. It must reach the peer as a reset.
				if err := rawsys.SoError(src.fd); err != nil {
					c.broken(src, err)
					return
				}
			}
			c.ended[d] = true
			if c.ended[0] && c.ended[1] {
				// Both sides are done: the close sends the last FIN (a
				// shutdown would be one syscall more), unless the backend,
				// done first, may yet reset the client's last bytes
				// (latereset.go).
				if d == 1 || !c.lingerOnBackend() {
					c.close(CloseCompleted, false, false)
				}
				return
			}
			rawsys.ShutdownWrite(dst.fd)
		case splice.ReadFailed:
			c.broken(src, err)
			return
		case splice.WriteFailed:
			c.salvage(1 - d)
			c.broken(dst, err)
			return
		case splice.Budget:
			more = true
		}
	}
	if progress {
		c.lastActive = c.l.r.Now()
		if c.settle != nil && firstBefore == 0 && c.streams[1].Delivered > 0 {
			c.settle.Settle(dialer.Success) // the backend's first byte proves the dial
		}
	}
	if more && !c.queued {
		c.queued = true
		c.l.r.MarkReady(c)
	}
}

// salvage relays, before a reset is passed on, what the peer of a socket
// found broken by a write (or at connect) sent before it broke: a direct
// peer reads those bytes before ECONNRESET, and the write consumed the
// error, so reads now end in EOF.
func (c *conn) salvage(d int) {
	if c.ended[d] {
		return
	}
	src, dst := &c.cl, &c.be
	if d == 1 {
		src, dst = dst, src
	}
	s := &c.streams[d]
	src.readable = true // dead: reads no longer block
	s.PeerDone = true
	s.Urgent = s.Urgent || src.urgent
	before := s.Delivered
	s.Move(src.fd, dst.fd, &src.readable, &dst.writable, moveBudget, c.l.scratch)
	if n := s.Delivered - before; n > 0 {
		if d == 0 {
			c.backend.Meter.ToBackend.Add(n)
		} else {
			c.backend.Meter.ToClient.Add(n)
		}
	}
}

// checkIdle runs when the idle timer fires. Traffic does not touch the
// timer; it re-arms itself for what is left since the last activity.
func (c *conn) checkIdle(now int64) {
	idle := int64(c.pool.IdleTimeout())
	left := idle - (now - c.lastActive)
	// Sampled on every run, so "draining" means a send queue changed since
	// the previous run, not merely that it holds bytes: a slow peer still
	// reading out what l4lb handed over long ago is traffic too.
	if c.peersDraining() && left <= 0 {
		c.lastActive, left = now, idle
	}
	if left > 0 {
		c.l.r.Arm(&c.timer, now+left)
		return
	}
	// A cut stream must never look complete: reset both sides, whatever
	// either had sent.
	c.close(CloseIdleTimeout, true, true)
}

func (c *conn) peersDraining() bool {
	draining := false
	for i, fd := range [2]int{c.cl.fd, c.be.fd} {
		q := rawsys.Unacked(fd)
		if q > 0 && q != c.outq[i] {
			draining = true
		}
		c.outq[i] = q
	}
	return draining
}

// watchWrites asks for EPOLLOUT on e, registered for reading only, now that
// a write found it full: its edge says when the rest can go. false: the
// loop could not, and the connection is closed (no event would ever come).
func (c *conn) watchWrites(e *endpoint) bool {
	e.writesUnwatched = false
	if err := c.l.r.WatchWrites(e.fd); err != nil {
		c.l.sh.Log.Warn("connection closed: cannot watch its socket for writing", "listener", c.f.Name, "error", err)
		c.close(CloseLocalError, true, true)
		return false
	}
	return true
}
