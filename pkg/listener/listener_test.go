package listener

import (
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

func TestSocketsShareOneAddress(t *testing.T) {
	tests := []struct{ name, addr string }{
		{"ipv4", "127.0.0.1:0"},
		{"ipv6", "[::1]:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Listen(Config{Name: "t", Addr: tc.addr, Loops: 3})
			if err != nil {
				if tc.name == "ipv6" {
					t.Skipf("no IPv6 loopback here: %v", err)
				}
				t.Fatal(err)
			}
			if len(l.sockets) != 3 {
				t.Fatalf("%d sockets, want 3", len(l.sockets))
			}
			for _, s := range l.sockets {
				if s.Addr().String() != l.Addr().String() {
					t.Fatalf("socket on %v, want all on %v", s.Addr(), l.Addr())
				}
			}
			var accepted atomic.Int64
			noDelay := make(chan int, 64)
			l.Serve(func(c *net.TCPConn) {
				accepted.Add(1)
				raw, _ := c.SyscallConn()
				raw.Control(func(fd uintptr) {
					v, _ := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY)
					noDelay <- v
				})
				c.Close()
			})
			const n = 40
			for i := 0; i < n; i++ {
				c, err := net.Dial("tcp", l.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			testnet.Eventually(t, "every connection accepted", func() bool { return accepted.Load() == n })
			for i := 0; i < n; i++ {
				if v := <-noDelay; v != 1 {
					t.Fatal("accepted connection without TCP_NODELAY")
				}
			}
			l.Close()
			if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
				t.Fatal("address still accepts after Close")
			}
		})
	}
}

func TestBacklogBoundsTheAcceptQueue(t *testing.T) {
	// Nobody accepts: the queue takes backlog+1 connections, then the
	// kernel drops SYNs and further dials time out.
	l, err := Listen(Config{Name: "t", Addr: "127.0.0.1:0", Loops: 1, Backlog: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	// Those that fit complete: a generous timeout, as a busy machine can
	// keep a dial waiting for CPU. Each is seen queued before the next.
	for i := 0; i < 3; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d of the 3 a backlog of 2 holds: %v", i+1, err)
		}
		defer c.Close()
		testnet.Eventually(t, "the connection to be queued", func() bool {
			queued, _ := testnet.AcceptQueue(t, l.sockets[0])
			return queued > i
		})
	}
	if queued, limit := testnet.AcceptQueue(t, l.sockets[0]); queued != 3 || limit != 2 {
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

func TestListenErrors(t *testing.T) {
	if _, err := Listen(Config{Name: "bad", Addr: "localhost:80"}); err == nil {
		t.Fatal("a host name was accepted; want an IP literal error")
	}
	l, err := Listen(Config{Name: "a", Addr: "127.0.0.1:0", Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Another process (or config) without SO_REUSEPORT on the same port.
	plain, err := net.Listen("tcp", l.Addr().String())
	if err == nil {
		plain.Close()
		t.Fatal("a plain listener could bind the same port")
	}
	// A second l4lb on the same address must not join the SO_REUSEPORT
	// group silently and steal a share of the connections.
	if l2, err := Listen(Config{Name: "b", Addr: l.Addr().String(), Loops: 1}); err == nil {
		l2.Close()
		t.Fatal("a second listener joined an address already in use")
	} else if !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("error %q does not say the address is in use", err)
	}
}

func TestAcceptBacksOffOnEMFILEAndRecovers(t *testing.T) {
	l, err := Listen(Config{Name: "t", Addr: "127.0.0.1:0", Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Queue connections before the fd limit is lowered.
	var clients []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// The limit bounds fd numbers: set it to the lowest free one, found by
	// opening a probe fd, and every new fd fails with EMFILE.
	probe, err := syscall.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(probe)
	low := old
	low.Cur = uint64(probe)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
			restored = true
		}
	}
	defer restore()

	var accepted atomic.Int64
	l.Serve(func(c *net.TCPConn) {
		accepted.Add(1)
		c.Close()
	})
	testnet.Eventually(t, "accept to fail", func() bool { return l.AcceptErrors() > 0 })
	time.Sleep(600 * time.Millisecond)
	errs := l.AcceptErrors()
	restore()
	// A spinning loop fails thousands of times in 600 ms; backing off from
	// 5 ms doubling fails about eight times.
	if errs > 50 {
		t.Fatalf("%d failed accepts in 600ms: the loop is spinning", errs)
	}
	if accepted.Load() != 0 {
		t.Fatal("accepted while out of fds")
	}
	testnet.Eventually(t, "queued connections accepted after fds are back", func() bool { return accepted.Load() == int64(len(clients)) })
}
