package pool_test

import (
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// count_early_reset judges a dial by the backend's first move, but only
// within early_reset_window: a backend silent for longer has accepted the
// connection, and a reset after that is no failed connect.
func TestEarlyResetWindowSettlesASilentBackendAsSuccess(t *testing.T) {
	testnet.CheckLeaks(t)
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
	p := newLB(t, []string{ln.Addr().String()}, "[pool.p.health]\nenabled = false\n"+
		"[pool.p.breaker]\nfailures = 1\ncount_early_reset = true\nearly_reset_window = \"100ms\"")
	b := p.Backends()[0]
	c := p.dial(t)
	defer c.Close()
	var bc *net.TCPConn
	select {
	case bc = <-accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("l4lb never dialed the backend")
	}
	// Silent past the window: the dial settles as a success on its own.
	testnet.Eventually(t, "the silent backend's dial to settle", func() bool {
		ok, _ := b.Dials(pool.DialClient)
		return ok == 1
	})
	bc.SetLinger(0)
	bc.Close() // a reset, now long after the connect
	if err := readToEnd(t, c); !isReset(err) {
		t.Fatalf("client: %v, want the backend's reset passed on", err)
	}
	p.idle(t)
	if ok, failed := b.Dials(pool.DialClient); ok != 1 || failed != 0 {
		t.Fatalf("dials %d ok / %d failed, want 1 / 0: a late reset was judged a failed connect", ok, failed)
	}
	if b.Breaker().Open {
		t.Fatal("a reset after the window tripped the breaker (failures = 1)")
	}
}
