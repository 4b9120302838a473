package relay

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/proxyproto"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// sendProxyHeader tells the backend who the client is (the pool's
// proxy_protocol) before any client byte: written straight after the
// connect, while the relay has moved nothing yet. The socket was just
// connected, so its send buffer takes the few dozen bytes whole; a short
// write is this host's trouble and the client is refused, never relayed
// without its header. It reports whether the connection goes on; when it
// does not, the client is counted here: rejected for this host's trouble
// (local_error), ok for a backend that reset (backend_reset), so the
// results agree with the close reasons.
func (c *conn) sendProxyHeader(version int) bool {
	dst := c.dst
	if !dst.IsValid() {
		// What the client connected to: the listener's address, or with
		// a wildcard bind the one the client chose.
		ap, err := rawsys.Getsockname(c.cl.fd)
		if err != nil {
			c.headerNotSent(fmt.Errorf("no local address: %w", err))
			return false
		}
		dst = ap
	}
	src := netip.AddrPortFrom(c.src.Addr().Unmap(), c.src.Port())
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	var hdr []byte
	if version == 1 {
		hdr = proxyproto.AppendV1(c.l.hdr[:0], src, dst)
	} else {
		hdr = proxyproto.AppendV2(c.l.hdr[:0], proxyproto.Stream, src, dst)
		if c.sni != nil && c.sni.serverName != "" {
			// The name the client asked for, as its ClientHello said it.
			hdr = proxyproto.AppendTLV(hdr, 0, proxyproto.TLVAuthority, c.sni.serverName)
		}
	}
	n, err := writeHeader(c.be.fd, hdr)
	if err == nil && n != len(hdr) {
		err = errors.New("short write")
	}
	if err == unix.ECONNRESET || err == unix.EPIPE {
		// The backend reset right after accepting: its doing, judged as
		// any reset before its first byte (count_early_reset). The client
		// was served, as by any backend that resets.
		c.opened()
		c.salvage(1)
		c.broken(&c.be, err)
		return false
	}
	if err != nil {
		c.headerNotSent(fmt.Errorf("%d of %d bytes: %w", n, len(hdr), err))
		return false
	}
	return true
}

// headerNotSent ends a connected client whose PROXY header this host could
// not send: local trouble, counted as rejected like any other (refuse),
// with both sides reset (the backend may hold part of a header).
func (c *conn) headerNotSent(err error) {
	c.f.Rejected.Add(1)
	if c.f.OnLocalError != nil {
		c.f.OnLocalError(c.pool.Name)
	}
	c.debug("PROXY header not sent", err)
	c.close(CloseLocalError, true, true)
}

// writeHeader writes a PROXY header to a backend socket: rawsys.Write, or,
// in a test, a write that fails the way this host's trouble would (a short
// write, ENOBUFS), which a freshly connected socket never does on demand.
// Tests set it before their loops start and restore it after they stop.
var writeHeader = rawsys.Write
