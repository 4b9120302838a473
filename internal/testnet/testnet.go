// Package testnet holds helpers for tests on real sockets and real
// programs: free ports, tagged echo and frozen backends, polling with a
// generous deadline (on the real or a fake clock), fd and goroutine leak
// checks, dnsmasq and dig, redis-server, IPv6 and tool checks.
package testnet

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FreePort returns a TCP port that was free a moment ago on every address
// and that no earlier call in this process returned: the kernel may hand a
// port just closed out again, and a test that asks for a listener's port
// and a dead backend's port must not get the same one twice.
//
// The kernel picks it for a bind to the wildcard address (IPv4 and IPv6)
// without SO_REUSEADDR, which it grants only on a port no socket uses. A
// bind to 127.0.0.1 with SO_REUSEADDR (what net.Listen does) may be given
// a port that outgoing connections are using as their source port, and a
// test then binding "0.0.0.0:PORT" on it fails (seen under go test's
// parallel packages, many connections at once).
func FreePort(t testing.TB) int {
	t.Helper()
	for {
		port, err := unusedPort()
		if err != nil {
			t.Fatal(err)
		}
		handedMu.Lock()
		fresh := !handed[port]
		handed[port] = true
		handedMu.Unlock()
		if fresh {
			return port
		}
	}
}

// unusedPort is the port the kernel gives a TCP socket bound to the
// wildcard without SO_REUSEADDR: a dual-stack "[::]:0", so that neither an
// IPv4 nor an IPv6 socket uses it, or "0.0.0.0:0" on a host without IPv6.
func unusedPort() (int, error) {
	port, err := unusedPortOf(unix.AF_INET6)
	if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EADDRNOTAVAIL) {
		port, err = unusedPortOf(unix.AF_INET)
	}
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	return port, nil
}

func unusedPortOf(family int) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var sa unix.Sockaddr = &unix.SockaddrInet4{}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return 0, err
		}
		sa = &unix.SockaddrInet6{}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return 0, err
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		return a.Port, nil
	case *unix.SockaddrInet6:
		return a.Port, nil
	}
	return 0, fmt.Errorf("getsockname: %T", got)
}

// handed are the ports FreePort returned.
var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// FreeAddr is "127.0.0.1:PORT" with a free port.
func FreeAddr(t testing.TB) string { return fmt.Sprintf("127.0.0.1:%d", FreePort(t)) }

// Eventually polls cond (WaitUntil) until it holds, failing the test after
// a generous deadline: kernel sockets are not on a test's clock.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !WaitUntil(20*time.Second, cond) {
		t.Fatalf("timed out waiting: %s", what)
	}
}

// Backend is an echo server that first sends its tag line, so a client
// learns which backend it reached, then echoes everything.
type Backend struct {
	Tag      string
	Addr     string
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// StartBackend listens on addr ("" for a free port) until the test ends.
// A test that starts a backend starts connections: it is leak-checked
// (CheckLeaks), from here if nothing began the check earlier.
func StartBackend(t testing.TB, tag, addr string) *Backend {
	t.Helper()
	CheckLeaks(t)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{Tag: tag, Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.Close)
	return b
}

func (b *Backend) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.accepted.Add(1)
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() {
				b.mu.Lock()
				delete(b.conns, c)
				b.mu.Unlock()
				c.Close()
			}()
			if _, err := fmt.Fprintf(c, "%s\n", b.Tag); err != nil {
				return
			}
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if tc, ok := c.(*net.TCPConn); ok {
						tc.CloseWrite()
					}
					return
				}
			}
		}()
	}
}

// Accepted counts connections the backend accepted (health checks too).
func (b *Backend) Accepted() int64 { return b.accepted.Load() }

// Close stops listening and closes every open connection.
func (b *Backend) Close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// Hello connects to addr (from local, if not empty) and returns the tag
// line of the backend that answered.
func Hello(addr, local string) (string, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return line[:len(line)-1], nil
}
