// Package testnet holds helpers for tests on real sockets and real
// programs: free ports, tagged echo and frozen backends, polling with a
// generous deadline (on the real or a fake clock), fd and goroutine leak
// checks, dnsmasq and dig, redis-server, IPv6 and tool checks.
package testnet

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
