package pool_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/proxyproto"
)

// serveEach accepts on a free port of 127.0.0.1 and runs handle on each
// connection in a goroutine of its own, closing the connection when
// handle returns; everything is closed and waited for when the test ends.
func serveEach(t *testing.T, handle func(c net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln
}

// headerReader accepts connections and keeps what each sent before
// closing: a backend that expects PROXY headers.
type headerReader struct {
	ln   net.Listener
	mu   sync.Mutex
	seen [][]byte
}

func startHeaderReader(t *testing.T) *headerReader {
	t.Helper()
	h := &headerReader{}
	h.ln = serveEach(t, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		h.mu.Lock()
		h.seen = append(h.seen, b)
		h.mu.Unlock()
	})
	return h
}

func (h *headerReader) headers() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.seen...)
}

// A connect check of a pool whose backends expect a PROXY header sends a
// LOCAL one before it closes, so the backend does not see (and log) a
// connection without a header on every check.
func TestConnectCheckSendsLocalHeader(t *testing.T) {
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) {
			h := startHeaderReader(t)
			clk := clock.NewFake(time.Now())
			newPoolOn(t, clk, []string{h.ln.Addr().String()}, "proxy_protocol = \""+v+"\"\n[pool.p.health]\ninterval = \"1s\"\ntimeout = \"1s\"\n")
			testnet.EventuallyOn(t, clk, 100*time.Millisecond, "two checks", func() bool { return len(h.headers()) >= 2 })
			for _, b := range h.headers() {
				hdr, n, err := proxyproto.Parse(b)
				if err != nil || !hdr.Local || n != len(b) || hdr.Version != map[string]int{"v1": 1, "v2": 2}[v] {
					t.Fatalf("a check sent %q: %+v, %d bytes, %v; want exactly a LOCAL %s header", b, hdr, n, err, v)
				}
			}
		})
	}
}
