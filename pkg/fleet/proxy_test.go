package fleet

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cutProxy is a TCP proxy to a redis-server that a test can cut off while
// the server keeps its data: an instance pointed at the proxy loses Redis,
// one pointed at the server does not.
//
//   - Cut closes every connection and stops listening: new dials are
//     refused, so store calls fail fast.
//   - Stall keeps every connection open and accepts new ones but forwards
//     nothing: store calls hang until their timeout, as on a network that
//     drops packets.
//   - Heal ends either: it closes the connections of a stall (whose byte
//     streams lost data) and listens again on the same address.
type cutProxy struct {
	t      testing.TB
	target string
	addr   string

	stalled atomic.Bool
	// held counts the bytes a stall kept from the server: a call the
	// stall holds has been sent once it grows.
	held atomic.Int64

	mu     sync.Mutex
	ln     net.Listener // nil while cut
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startProxy listens on a free port of 127.0.0.1 and forwards to target
// until the test ends.
func startProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's address as a redis:// URL.
func (p *cutProxy) URL() string { return "redis://" + p.addr }

func (p *cutProxy) serve(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted(c)
		}
	}()
}

// track adds c to the connections Cut and Heal close; false when the proxy
// is closed or cut meanwhile (c is closed then).
func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ln == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *cutProxy) accepted(c net.Conn) {
	if !p.track(c) {
		return
	}
	if p.stalled.Load() {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			io.Copy(io.Discard, c)
		}()
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		p.untrack(c)
		return
	}
	if !p.track(up) {
		p.untrack(c)
		return
	}
	p.wg.Add(2)
	go p.pipe(up, c)
	go p.pipe(c, up)
}

// pipe copies src to dst until either ends, dropping what it reads while
// stalled, then closes both.
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.untrack(dst)
	defer p.untrack(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.stalled.Load() {
			p.held.Add(int64(n))
		} else if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// dropConns closes every connection; p.mu must be held.
func (p *cutProxy) dropConns() {
	for c := range p.conns {
		c.Close()
	}
}

// Cut closes every connection and stops listening: dials are refused.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.dropConns()
}

// Stall stops forwarding: every call through the proxy hangs.
func (p *cutProxy) Stall() { p.stalled.Store(true) }

// Heal lets traffic through again: it closes the connections of a stall
// and listens again (on the same address) after a cut.
func (p *cutProxy) Heal() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled.Swap(false) {
		p.dropConns()
	}
	if p.ln != nil || p.closed {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.dropConns()
	p.mu.Unlock()
	p.wg.Wait()
}
