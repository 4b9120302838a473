package testnet

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Taker is a backend that plays no part of its own: it hands every
// connection it accepts to the test, which then acts as the backend itself
// (reads, writes, half-closes, resets, or never reads at all).
type Taker struct {
	Addr string
	ln   *net.TCPListener
	ch   chan *net.TCPConn
	done chan struct{}

	mu    sync.Mutex
	conns []*net.TCPConn
}

// StartTaker listens on a free port of 127.0.0.1 until the test ends; then
// it closes every connection it accepted. Like StartBackend, it begins the
// test's leak check (CheckLeaks).
func StartTaker(t testing.TB) *Taker {
	t.Helper()
	CheckLeaks(t)
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	k := &Taker{Addr: ln.Addr().String(), ln: ln, ch: make(chan *net.TCPConn, 4096), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			k.mu.Lock()
			k.conns = append(k.conns, c)
			k.mu.Unlock()
			k.ch <- c
		}
	}()
	t.Cleanup(k.Close)
	return k
}

// Next returns the next accepted connection, failing the test when none
// comes within a generous deadline.
func (k *Taker) Next(t testing.TB) *net.TCPConn {
	t.Helper()
	select {
	case c := <-k.ch:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("backend accepted no connection")
		return nil
	}
}

// Close stops listening and closes every accepted connection.
func (k *Taker) Close() {
	k.ln.Close()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

// Sink is a backend that reads and discards everything each connection
// sends, then closes the connection once the peer has half-closed (so the
// peer learns every byte was taken).
type Sink struct {
	Addr     string
	ln       net.Listener
	received atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

// StartSink listens on a free port of 127.0.0.1 until the test ends. Like
// StartBackend, it begins the test's leak check (CheckLeaks).
func StartSink(t testing.TB) *Sink {
	t.Helper()
	CheckLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
					c.Close()
				}()
				buf := make([]byte, 256<<10)
				for {
					n, err := c.Read(buf)
					s.received.Add(int64(n))
					if err != nil { // EOF once the peer is done, or a reset
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

// Received is the number of bytes the sink has read, over all connections.
func (s *Sink) Received() int64 { return s.received.Load() }

// Close stops listening and closes every open connection.
func (s *Sink) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
