package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/listener"
)

// Clients that connected just before a shutdown, still in the accept
// queue, are accepted when the listeners close and drained like the
// others: the drain must not find "no connection open", stop the loops
// and reset them.
func TestShutdownDrainsClientsStillQueued(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	tp, _ := inheritPools(t, be.Addr, "")
	socks, err := listener.Bind("q", "127.0.0.1:0", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := socks.Addr.String()
	s := newServer(t, 1, Frontend{Name: "q", Bind: addr, Pool: tp, FDs: socks.FDs})
	s.Serve()
	release := holdLoop(s, 0)
	defer release()
	const n = 20
	clients := make([]*net.TCPConn, n)
	for i := range clients {
		clients[i] = dial(t, addr) // queued: the loop is held
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	testnet.Eventually(t, "the shutdown to begin", func() bool {
		s.reloadMu.Lock()
		defer s.reloadMu.Unlock()
		return s.closed
	})
	release()
	for i, c := range clients {
		c.SetDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(c)
		if tag, err := r.ReadString('\n'); err != nil || tag != "b\n" {
			t.Fatalf("client %d of %d queued at shutdown: %q, %v (want the backend's tag)", i, n, tag, err)
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if _, err := io.ReadFull(r, make([]byte, 4)); err != nil {
			t.Fatalf("client %d: echo: %v", i, err)
		}
		c.Close()
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v, want every queued client drained", err)
	}
}
