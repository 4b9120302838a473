package testnet

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FrozenBackend returns the address of a listener that never accepts and
// whose accept queue is already full, so the kernel drops new SYNs: a
// connect to it can only time out. Like StartBackend, it begins the
// test's leak check (CheckLeaks).
func FrozenBackend(t testing.TB) string {
	t.Helper()
	CheckLeaks(t)
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
	// Fill the queue, and learn that it is full from the kernel rather
	// than from a dial that timed out: on a busy machine a dial can time
	// out for want of CPU while the queue still has room.
	for filled := 0; ; filled++ {
		queued, limit, err := acceptQueue(fd)
		if err != nil {
			t.Fatal(err)
		}
		if queued > limit {
			return addr // full: SYNs are being dropped now
		}
		if filled == 8 {
			t.Fatalf("accept queue never filled (%d queued, limit %d)", queued, limit)
		}
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("filling the accept queue: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		// The client's connect completes before the listener has queued
		// the connection: wait for that, so the next look is current.
		Eventually(t, "the connection to be queued", func() bool {
			queued, _, err := acceptQueue(fd)
			return err != nil || queued > filled
		})
	}
}

// AcceptQueue reports how many connections wait in a listening socket's
// accept queue and the queue's limit (the kernel takes one more than the
// limit, then drops SYNs). It reads the kernel's own counts (TCP_INFO of a
// listener), so a test need not guess fullness from dials timing out.
func AcceptQueue(t testing.TB, ln syscall.Conn) (queued, limit int) {
	t.Helper()
	raw, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var qerr error
	if err := raw.Control(func(fd uintptr) { queued, limit, qerr = acceptQueue(int(fd)) }); err != nil {
		t.Fatal(err)
	}
	if qerr != nil {
		t.Fatal(qerr)
	}
	return queued, limit
}

// acceptQueue: for a listening socket, Linux reports the accept queue's
// length in tcpi_unacked and its limit in tcpi_sacked.
func acceptQueue(fd int) (queued, limit int, err error) {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, 0, err
	}
	return int(info.Unacked), int(info.Sacked), nil
}
