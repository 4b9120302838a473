package server

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// sockAddrPort converts a socket address of an inet socket.
func sockAddrPort(sa unix.Sockaddr) (netip.AddrPort, bool) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port)), true
	}
	return netip.AddrPort{}, false
}

// findSocket returns the fd of this process's socket whose local and peer
// addresses are local and peer (l4lb runs in the test's process, so its
// sockets are the test's fds), or -1.
func findSocket(local, peer netip.AddrPort) int {
	for fd := 3; fd < 4096; fd++ {
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		if ap, ok := sockAddrPort(sa); !ok || ap != local {
			continue
		}
		pa, err := unix.Getpeername(fd)
		if err != nil {
			continue
		}
		if ap, ok := sockAddrPort(pa); ok && ap == peer {
			return fd
		}
	}
	return -1
}

// kernelDefault reads an integer of /proc/sys/net/ipv4 (-1 if unreadable).
func kernelDefault(name string) int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

type keepalive struct {
	on             bool
	idle, interval time.Duration
	count          int
}

// l4lbKeepalive finds l4lb's two sockets of the relay between client c and
// backend connection bc, and reads their keepalive options.
func l4lbKeepalive(t *testing.T, c, bc *net.TCPConn) (client, backend keepalive) {
	t.Helper()
	read := func(what string, local, peer net.Addr) keepalive {
		fd := findSocket(mustAddrPort(t, local), mustAddrPort(t, peer))
		if fd < 0 {
			t.Fatalf("no socket of l4lb's %s side %v -> %v in this process", what, local, peer)
		}
		var k keepalive
		var err error
		k.on, k.idle, k.interval, k.count, err = sockopt.Read(fd)
		if err != nil {
			t.Fatalf("%s side: %v", what, err)
		}
		return k
	}
	// l4lb's client-side socket is the client's connection seen from the
	// other end; its backend-side socket is the backend's seen likewise.
	return read("client", c.RemoteAddr(), c.LocalAddr()), read("backend", bc.RemoteAddr(), bc.LocalAddr())
}

// TCP keepalive on either side of a relay: a listener's on the sockets it
// accepts, a pool's on the sockets it dials; off by default.
func TestKeepalive(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		noLeaks(t)
		k := testnet.StartTaker(t)
		l := startLB(t, policyTOML(t, "", "keepalive = \"30s\"\nkeepalive_interval = \"5s\"\nkeepalive_count = 3",
			"round-robin", `keepalive = "45s"`, beSpec{addr: k.Addr}), 0)
		c := dialFrom(t, "127.0.0.1", l.addr)
		bc := k.Next(t)
		t.Cleanup(func() { bc.Close() }) // before the server's shutdown waits for it
		echo := []byte("x")
		if _, err := c.Write(echo); err != nil {
			t.Fatal(err)
		}
		readExactly(t, bc, echo) // the relay is up
		cl, be := l4lbKeepalive(t, c, bc)
		if want := (keepalive{true, 30 * time.Second, 5 * time.Second, 3}); cl != want {
			t.Errorf("client side keepalive %+v, want %+v", cl, want)
		}
		if !be.on || be.idle != 45*time.Second {
			t.Errorf("backend side keepalive %+v, want on with idle 45s", be)
		}
		// Interval and count left out: the kernel's defaults.
		if n := kernelDefault("tcp_keepalive_intvl"); n >= 0 && be.interval != time.Duration(n)*time.Second {
			t.Errorf("backend side interval %v, want the kernel's %ds", be.interval, n)
		}
		if n := kernelDefault("tcp_keepalive_probes"); n >= 0 && be.count != n {
			t.Errorf("backend side count %d, want the kernel's %d", be.count, n)
		}
	})

	t.Run("off", func(t *testing.T) {
		noLeaks(t)
		k := testnet.StartTaker(t)
		l := startLB(t, policyTOML(t, "", "", "round-robin", "", beSpec{addr: k.Addr}), 0)
		c := dialFrom(t, "127.0.0.1", l.addr)
		bc := k.Next(t)
		t.Cleanup(func() { bc.Close() }) // before the server's shutdown waits for it
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		readExactly(t, bc, []byte("x"))
		cl, be := l4lbKeepalive(t, c, bc)
		if cl.on || be.on {
			t.Errorf("keepalive on by default: client side %+v, backend side %+v", cl, be)
		}
	})

	// The pool's keepalive with its own interval and count.
	t.Run("pool-full", func(t *testing.T) {
		noLeaks(t)
		k := testnet.StartTaker(t)
		l := startLB(t, policyTOML(t, "", "", "round-robin",
			"keepalive = \"1m30s\"\nkeepalive_interval = \"7s\"\nkeepalive_count = 4", beSpec{addr: k.Addr}), 0)
		c := dialFrom(t, "127.0.0.1", l.addr)
		bc := k.Next(t)
		t.Cleanup(func() { bc.Close() }) // before the server's shutdown waits for it
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		readExactly(t, bc, []byte("x"))
		cl, be := l4lbKeepalive(t, c, bc)
		if cl.on {
			t.Errorf("client side keepalive %+v with none set", cl)
		}
		if want := (keepalive{true, 90 * time.Second, 7 * time.Second, 4}); be != want {
			t.Errorf("backend side keepalive %+v, want %+v", be, want)
		}
	})
}
