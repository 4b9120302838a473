package proxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerGone reports, without blocking or consuming data, whether the client
// has closed or reset its connection. It is asked after a failed dial, so a
// client that gave up while its dial was in flight does not count against
// the backend.
func peerGone(c *net.TCPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	var b [1]byte
	raw.Control(func(fd uintptr) {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || (err != nil && err != unix.EAGAIN && err != unix.EINTR)
	})
	return gone
}
