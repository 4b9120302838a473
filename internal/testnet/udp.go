package testnet

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// UDPBackend is a UDP echo server: it returns every datagram as it came,
// except "who", answered with its tag, so a client learns which backend
// it reached. Silent makes it receive without answering.
type UDPBackend struct {
	Tag    string
	Addr   string
	conn   *net.UDPConn
	Silent atomic.Bool

	received atomic.Int64
	mu       sync.Mutex
	sources  map[string]int // datagrams by source address
	done     chan struct{}
	once     sync.Once
}

// StartUDPBackend listens on addr ("" for a free port on 127.0.0.1) until
// the test ends.
func StartUDPBackend(t testing.TB, tag, addr string) *UDPBackend {
	t.Helper()
	CheckLeaks(t)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", ua)
	if err != nil {
		t.Fatal(err)
	}
	b := &UDPBackend{Tag: tag, Addr: c.LocalAddr().String(), conn: c, sources: map[string]int{}, done: make(chan struct{})}
	go b.serve()
	t.Cleanup(b.Close)
	return b
}

func (b *UDPBackend) serve() {
	defer close(b.done)
	buf := make([]byte, 1<<16)
	for {
		n, from, err := b.conn.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		b.received.Add(1)
		b.mu.Lock()
		b.sources[from.String()]++
		b.mu.Unlock()
		if b.Silent.Load() {
			continue
		}
		reply := buf[:n]
		if string(reply) == "who" {
			reply = []byte(b.Tag)
		}
		b.conn.WriteToUDP(reply, from)
	}
}

// Received is the number of datagrams received.
func (b *UDPBackend) Received() int64 { return b.received.Load() }

// Sources is the number of distinct source addresses seen.
func (b *UDPBackend) Sources() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sources)
}

// Close stops the backend; its port then refuses (ICMP port unreachable).
func (b *UDPBackend) Close() {
	b.once.Do(func() {
		b.conn.Close()
		<-b.done
	})
}
