package loop

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/proxyproto"
)

// sendProxyHeader tells the backend who the client is (the pool's
// proxy_protocol) before any client byte: written straight after the
// connect, while the relay has moved nothing yet. The socket was just
// connected, so its send buffer takes the few dozen bytes whole; a short
// write is this host's trouble and the client is refused, never relayed
// without its header. It reports whether the connection goes on.
func (c *conn) sendProxyHeader(version int) bool {
	dst := c.dst
	if !dst.IsValid() {
		// What the client connected to: the listener's address, or with
		// a wildcard bind the one the client chose.
		ap, err := getsockname(c.cl.fd)
		if err != nil {
			c.close(CloseLocalError, true, true)
			c.debug("PROXY header: no local address", err)
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
	}
	n, err := unix.Write(c.be.fd, hdr)
	for err == unix.EINTR {
		n, err = unix.Write(c.be.fd, hdr)
	}
	if err == nil && n != len(hdr) {
		err = errors.New("short write")
	}
	if err == unix.ECONNRESET || err == unix.EPIPE {
		// The backend reset right after accepting: its doing, judged as
		// any reset before its first byte (count_early_reset).
		c.salvage(1)
		c.broken(&c.be, err)
		return false
	}
	if err != nil {
		c.debug("PROXY header not sent", fmt.Errorf("%d of %d bytes: %w", n, len(hdr), err))
		c.close(CloseLocalError, true, true)
		return false
	}
	return true
}
