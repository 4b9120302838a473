package pool

import (
	"context"
	"net"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// count_early_reset judges a dial by the backend's first move, but only
// within early_reset_window: a backend silent for longer has accepted the
// connection, and a reset after that is no failed connect.
func TestEarlyResetWindowSettlesASilentBackendAsSuccess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*net.TCPConn)
		}
	}()
	p := newPool(t, []string{ln.Addr().String()}, "[pool.p.health]\nenabled = false\n"+
		"[pool.p.breaker]\nfailures = 1\ncount_early_reset = true\nearly_reset_window = \"100ms\"")
	b := p.Backends()[0]
	up, err := p.Connect(context.Background(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, sv := tcpPair(t)
	defer cl.Close()
	r := p.StartRelay(sv, up)
	bc := <-accepted
	// Silent past the window: the dial settles as a success on its own.
	testnet.Eventually(t, "the silent backend's dial to settle", func() bool {
		ok, _ := b.Dials(DialClient)
		return ok == 1
	})
	bc.SetLinger(0)
	bc.Close() // a reset, now long after the connect
	if res := r.Wait(); res.Outcome.String() != "backend-reset" {
		t.Fatalf("relay %+v, want a backend reset", res)
	}
	if ok, failed := b.Dials(DialClient); ok != 1 || failed != 0 {
		t.Fatalf("dials %d ok / %d failed, want 1 / 0: a late reset was judged a failed connect", ok, failed)
	}
	if b.Breaker().Open {
		t.Fatal("a reset after the window tripped the breaker (failures = 1)")
	}
}
