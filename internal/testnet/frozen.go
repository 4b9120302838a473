package testnet

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FrozenBackend returns the address of a listener that never accepts and
// whose accept queue is already full, so the kernel drops new SYNs: a
// connect to it can only time out.
func FrozenBackend(t testing.TB) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}).String()
	for filled := 0; filled < 8; filled++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // queue full: SYNs are being dropped now
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("accept queue never filled")
	return ""
}
