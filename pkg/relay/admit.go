package relay

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/proxyproto"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// begin runs the listener's policy on a client just accepted: a PROXY
// header first where the listener takes one, then access control and the
// per-source limits on the client's address, then the dial.
func (c *conn) begin() {
	pol := c.f.Policy()
	c.policy = pol
	if pol != nil && pol.AcceptProxy {
		if !pol.trusted(c.src.Addr()) {
			// Reset before reading a byte: a header from an untrusted
			// peer could claim any client address.
			c.refuseBy(CloseProxyUntrusted, true)
			return
		}
		c.phase = phaseProxy
		c.l.r.Arm(&c.timer, c.l.r.Clock()+int64(pol.ProxyTimeout))
		c.readProxyHeader() // it may have come with the handshake
		return
	}
	c.admitted()
}

// admitted applies access control and the per-source limits to the
// client's address (the original one when a PROXY header named it), then
// dials.
func (c *conn) admitted() {
	if why := c.policy.admit(c.src.Addr().Unmap()); why != CloseCompleted {
		c.refuseBy(why, false)
		return
	}
	c.sourced = c.policy != nil && c.policy.Sources != nil
	if c.cl.hup {
		// The event that brought the PROXY header also reported a reset
		// (or a socket closed both ways): the client has left, and no
		// later event will say so. A dial now would judge a backend for
		// a client that is gone (docs/breaker.md, "Local trouble vs
		// backend failure").
		c.debug("client left with its PROXY header", unix.ECONNRESET)
		c.refuseBy(CloseClientLeft, false)
		return
	}
	if rt := c.f.Routing(); rt != nil {
		c.startInspect(rt) // the route, hence the pool, comes from the ClientHello
		return
	}
	c.startDial()
}

// readProxyHeader looks at what the client sent so far without taking it
// (MSG_PEEK), and once a whole header is there takes exactly its bytes:
// whatever followed it stays in the socket for the backend. Edge-triggered
// readiness holds: a header still incomplete waits for more bytes, which
// bring a new edge.
func (c *conn) readProxyHeader() {
	buf := c.l.hdr[:]
	n, ok := c.peekFirst(buf, "its PROXY header", CloseProxyHeader)
	if !ok {
		return
	}
	h, hl, err := proxyproto.Parse(buf[:n])
	if errors.Is(err, proxyproto.ErrNeedMore) {
		if c.cl.peerDone {
			c.debug("client closed within its PROXY header", err)
			c.refuseBy(CloseProxyHeader, true)
			return
		}
		c.cl.readable = false
		return
	}
	if err != nil {
		c.debug("malformed PROXY header", err)
		c.refuseBy(CloseProxyHeader, true)
		return
	}
	if m, err := rawsys.Recv(c.cl.fd, buf[:hl], 0); err != nil || m != hl {
		c.refuse(errors.Join(errors.New("taking the PROXY header off the socket"), err))
		return
	}
	c.l.r.Disarm(&c.timer)
	if !h.Local {
		// The client as the first proxy saw it: picked (ip-hash),
		// checked, logged and told to the backend by this address.
		c.src, c.dst = h.Src, h.Dst
	}
	c.phase = 0
	c.admitted()
}

// peekFirst copies what the client has sent so far into buf, leaving it
// in the socket (MSG_PEEK). ok is false when there is nothing to act on:
// nothing new yet (edge-triggered: new bytes bring a new edge), or the
// client failed or closed before sending awaited, and was refused (as
// closed when it closed).
func (c *conn) peekFirst(buf []byte, awaited string, closed CloseReason) (n int, ok bool) {
	n, err := rawsys.Recv(c.cl.fd, buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
	switch {
	case err == unix.EAGAIN:
		c.cl.readable = false
		return 0, false
	case err != nil:
		c.debug("client failed before "+awaited, err)
		c.refuseBy(CloseClientLeft, false)
		return 0, false
	case n == 0:
		c.debug("client closed before "+awaited, nil)
		c.refuseBy(closed, false)
		return 0, false
	}
	return n, true
}
