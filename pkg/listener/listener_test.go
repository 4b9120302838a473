package listener

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// rawFD lets testnet.AcceptQueue read a raw listening fd.
type rawFD int

func (f rawFD) SyscallConn() (syscall.RawConn, error) { return f, nil }
func (f rawFD) Control(fn func(fd uintptr)) error     { fn(uintptr(f)); return nil }
func (f rawFD) Read(func(fd uintptr) bool) error      { return syscall.ENOTSUP }
func (f rawFD) Write(func(fd uintptr) bool) error     { return syscall.ENOTSUP }

func bind(t *testing.T, addr string, backlog, n int) *Sockets {
	t.Helper()
	s, err := Bind("t", addr, backlog, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func sockopt(t *testing.T, fd, level, opt int) int {
	t.Helper()
	v, err := unix.GetsockoptInt(fd, level, opt)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// acceptAll accepts n connections from any of fds (non-blocking, as a loop
// does) and hands each to f, then closes it.
func acceptAll(t *testing.T, fds []int, n int, f func(fd int)) (perSocket []int) {
	t.Helper()
	perSocket = make([]int, len(fds))
	got := 0
	testnet.Eventually(t, fmt.Sprintf("%d connections accepted", n), func() bool {
		for i, lfd := range fds {
			for {
				fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
				if err == unix.EAGAIN {
					break
				}
				if err != nil {
					t.Fatalf("accept: %v", err)
				}
				f(fd)
				unix.Close(fd)
				perSocket[i]++
				got++
			}
		}
		return got == n
	})
	return perSocket
}

func TestSocketsShareOneAddress(t *testing.T) {
	tests := []struct{ name, addr string }{
		{"ipv4", "127.0.0.1:0"},
		{"ipv6", "[::1]:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			testnet.CheckLeaks(t)
			s, err := Bind("t", tc.addr, 0, 3)
			if err != nil {
				if tc.name == "ipv6" {
					t.Skipf("no IPv6 loopback here: %v", err)
				}
				t.Fatal(err)
			}
			defer s.Close()
			if len(s.FDs) != 3 {
				t.Fatalf("%d sockets, want 3", len(s.FDs))
			}
			if s.Addr.Port == 0 {
				t.Fatal("port 0 asked, but no port chosen")
			}
			for _, fd := range s.FDs {
				// Port 0: the kernel chose a port for the first socket, and
				// the others joined it.
				sa, err := unix.Getsockname(fd)
				if err != nil {
					t.Fatal(err)
				}
				if got := sockaddrToTCP(sa); got.String() != s.Addr.String() {
					t.Fatalf("socket on %v, want all on %v", got, s.Addr)
				}
				if sockopt(t, fd, unix.SOL_SOCKET, unix.SO_REUSEPORT) != 1 {
					t.Fatal("socket without SO_REUSEPORT")
				}
				// Raw fds for the loops' epoll sets: non-blocking, and not
				// inherited by a child process.
				if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
					t.Fatal("listening socket is blocking")
				}
				if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
					t.Fatal("listening socket without close-on-exec")
				}
			}
			const n = 40
			for i := 0; i < n; i++ {
				c, err := net.DialTimeout("tcp", s.Addr.String(), 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			perSocket := acceptAll(t, s.FDs, n, func(fd int) {
				// Inherited from the listener: no accept pays for them.
				if sockopt(t, fd, unix.IPPROTO_TCP, unix.TCP_NODELAY) != 1 {
					t.Error("accepted connection without TCP_NODELAY")
				}
				if sockopt(t, fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE) != 0 {
					t.Error("accepted connection with keepalive probes (dead peers are the idle timeout's)")
				}
			})
			t.Logf("connections per socket: %v", perSocket)
			addr := s.Addr.String()
			s.Close()
			for _, fd := range s.FDs {
				if fd != -1 {
					t.Fatal("Close left an fd in the list")
				}
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Fatal("address still accepts after Close")
			}
		})
	}
}

// Close closes only the fds not yet handed over: a loop that took its
// socket (and set its slot to -1) owns it.
func TestCloseLeavesHandedOverSockets(t *testing.T) {
	testnet.CheckLeaks(t)
	s := bind(t, "127.0.0.1:0", 0, 2)
	taken := s.FDs[1]
	defer unix.Close(taken)
	s.FDs[1] = -1
	s.Close()
	if _, err := unix.Getsockname(taken); err != nil {
		t.Fatalf("a handed-over socket was closed: %v", err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr.String(), 10*time.Second); err != nil {
		t.Fatalf("the handed-over socket no longer accepts: %v", err)
	} else {
		c.Close()
	}
}

func TestBacklogBoundsTheAcceptQueue(t *testing.T) {
	testnet.CheckLeaks(t)
	// Nobody accepts: the queue takes backlog+1 connections, then the
	// kernel drops SYNs and further dials time out.
	s := bind(t, "127.0.0.1:0", 2, 1)
	ln := rawFD(s.FDs[0])
	addr := s.Addr.String()
	// Those that fit complete: a generous timeout, as a busy machine can
	// keep a dial waiting for CPU. Each is seen queued before the next.
	for i := 0; i < 3; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d of the 3 a backlog of 2 holds: %v", i+1, err)
		}
		defer c.Close()
		testnet.Eventually(t, "the connection to be queued", func() bool {
			queued, _ := testnet.AcceptQueue(t, ln)
			return queued > i
		})
	}
	if queued, limit := testnet.AcceptQueue(t, ln); queued != 3 || limit != 2 {
		t.Fatalf("accept queue holds %d with limit %d, want 3 with limit 2", queued, limit)
	}
	// The rest are dropped: none may complete. (Only a completed dial
	// fails this; a busy machine can only make a dial time out.)
	for i := 0; i < 5; i++ {
		if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
			c.Close()
			t.Fatalf("connection %d completed past a full queue of backlog 2", 4+i)
		}
	}
}

// A backlog of 0 is the kernel's somaxconn.
func TestZeroBacklogIsSomaxconn(t *testing.T) {
	testnet.CheckLeaks(t)
	raw, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		t.Skipf("cannot read somaxconn: %v", err)
	}
	want, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	s := bind(t, "127.0.0.1:0", 0, 1)
	if _, limit := testnet.AcceptQueue(t, rawFD(s.FDs[0])); limit != want {
		t.Fatalf("backlog 0 gave an accept queue limit of %d, want somaxconn %d", limit, want)
	}
}

func TestBindErrors(t *testing.T) {
	testnet.CheckLeaks(t)
	if s, err := Bind("bad", "localhost:80", 0, 1); err == nil {
		s.Close()
		t.Fatal("a host name was accepted; want an IP literal error")
	}
	s := bind(t, "127.0.0.1:0", 0, 1)
	// Another process (or config) without SO_REUSEPORT on the same port.
	plain, err := net.Listen("tcp", s.Addr.String())
	if err == nil {
		plain.Close()
		t.Fatal("a plain listener could bind the same port")
	}
	// A second l4lb on the same address must not join the SO_REUSEPORT
	// group silently and steal a share of the connections.
	if s2, err := Bind("b", s.Addr.String(), 0, 1); err == nil {
		s2.Close()
		t.Fatal("a second listener joined an address already in use")
	} else if !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("error %q does not say the address is in use", err)
	}
	// Nor may it take the address from a plain listener.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if s3, err := Bind("c", other.Addr().String(), 0, 1); err == nil {
		s3.Close()
		t.Fatal("bound an address a plain listener holds")
	}
}

// IPv6 sockets are IPv6-only, so "[::]:P" sits beside "0.0.0.0:P" in the
// same configuration.
func TestIPv6AnyBesideIPv4Any(t *testing.T) {
	testnet.CheckLeaks(t)
	port := testnet.FreePort(t)
	v4 := bind(t, fmt.Sprintf("0.0.0.0:%d", port), 0, 2)
	v6, err := Bind("t6", fmt.Sprintf("[::]:%d", port), 0, 2)
	if err != nil {
		if strings.Contains(err.Error(), "already in use") {
			t.Fatalf("[::]:%d refused beside 0.0.0.0:%d: %v", port, port, err)
		}
		t.Skipf("no IPv6 here: %v", err)
	}
	defer v6.Close()
	for _, fd := range v6.FDs {
		if sockopt(t, fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY) != 1 {
			t.Fatal("IPv6 socket without IPV6_V6ONLY")
		}
	}
	// Each family reaches its own sockets.
	for _, tc := range []struct {
		addr string
		s    *Sockets
	}{{fmt.Sprintf("127.0.0.1:%d", port), v4}, {fmt.Sprintf("[::1]:%d", port), v6}} {
		c, err := net.DialTimeout("tcp", tc.addr, 10*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", tc.addr, err)
		}
		c.Close()
		acceptAll(t, tc.s.FDs, 1, func(int) {})
	}
}
