package proxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerGone reports, without reading, whether the client has left: asked
// after a failed dial, so that a client that gave up while its dial was in
// flight does not count against the backend (DESIGN, data path rule 5).
//
// It asks the kernel for the socket's TCP state instead of peeking at the
// data. A FIN only says the client has nothing more to send: a client that
// shut its write side and waits for its reply (CLOSE_WAIT here) is still
// there, gets its retry, and its failed dial is evidence. A reset moves the
// socket to CLOSE, whatever data it had sent before. A client that closed
// both ways cannot be told from a half-close by a FIN alone; it is seen as
// gone once it resets, which it does as soon as anything reaches it.
func peerGone(c *net.TCPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return true // closed under us: nothing to serve
	}
	gone := false
	err = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		// Without TCP_INFO nothing is known: blame nobody.
		gone = err != nil || info.State == unix.BPF_TCP_CLOSE
	})
	return gone || err != nil
}
