// Package testnet holds helpers for tests on real sockets: free ports,
// tagged echo backends and polling with a generous deadline.
package testnet

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FreePort returns a port on 127.0.0.1, free for TCP and UDP a moment
// ago, that no earlier call in this process returned: the kernel may hand
// a port just closed out again, and a test that asks for a listener's port
// and a dead backend's port must not get the same one twice.
//
// The port comes from outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range) where there is room: a port the kernel
// picked for a bind to port 0 is one it hands the next such bind, and go
// test runs packages side by side in separate processes, so another
// package's test listener could take it between this call and the bind
// it is for (a test then talked to the wrong process). Ports outside the
// range are only ever taken by name.
func FreePort(t testing.TB) int {
	t.Helper()
	if lo, hi, ok := outsideEphemeral(); ok {
		for range 1000 {
			port := lo + rand.IntN(hi-lo+1)
			if claim(port) {
				if portFree(port) {
					return port
				}
			}
		}
	}
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if claim(port) {
			return port
		}
	}
}

// claim marks port handed out; false if it was already.
func claim(port int) bool {
	handedMu.Lock()
	defer handedMu.Unlock()
	if handed[port] {
		return false
	}
	handed[port] = true
	return true
}

// portFree reports whether port binds on 127.0.0.1 for TCP and for UDP.
func portFree(port int) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// outsideEphemeral is a range of at least 1,000 ports that the kernel
// never picks for a bind to port 0: above its ephemeral range, else below
// it, from 40000 up (clear of the services and of the bench's port plan
// lower down).
func outsideEphemeral() (lo, hi int, ok bool) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	var first, last int
	if _, err := fmt.Sscan(string(data), &first, &last); err != nil {
		return 0, 0, false
	}
	switch {
	case 65535-last >= 1000:
		return last + 1, 65535, true
	case first-1-40000 >= 1000:
		return 40000, first - 1, true
	}
	return 0, 0, false
}

// handed are the ports FreePort returned.
var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// FreeAddr is "127.0.0.1:PORT" with a free port.
func FreeAddr(t testing.TB) string { return fmt.Sprintf("127.0.0.1:%d", FreePort(t)) }

// Eventually polls cond every 10 ms until it holds, failing the test after
// a generous deadline: kernel sockets are not on a test's clock.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
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
