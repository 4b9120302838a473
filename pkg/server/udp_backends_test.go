package server

import (
	"net"
	"sync"
	"testing"
)

// recorder is a UDP backend that keeps every datagram it receives, in
// order, and echoes it.
type recorder struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  []string
	done chan struct{}
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{conn: c, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 1<<16)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.got = append(r.got, string(buf[:n]))
			r.mu.Unlock()
			c.WriteToUDP(buf[:n], from)
		}
	}()
	t.Cleanup(func() { c.Close(); <-r.done })
	return r
}

func (r *recorder) addr() string { return r.conn.LocalAddr().String() }

func (r *recorder) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *recorder) count(p string) int {
	n := 0
	for _, g := range r.received() {
		if g == p {
			n++
		}
	}
	return n
}

func (r *recorder) has(p string) bool { return r.count(p) > 0 }

// answerN is a backend that answers a datagram starting with digit N with
// N copies of it ("0..." is never answered).
func answerN(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if n == 0 || buf[0] < '0' || buf[0] > '9' {
				continue
			}
			for range buf[0] - '0' {
				c.WriteToUDP(buf[:n], from)
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return c.LocalAddr().String()
}
