package pool_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/relay"
)

// a slot wait that ends in a wait for recovery is never counted
// in l4lb_client_queued_total (Queued).
func TestSlotWaitIntoRecoveryWaitIsCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi\n"))
			held <- c
		}
	}()
	extra := fmt.Sprintf("retries = 0\nqueue_timeout = \"10s\"\nconnect_timeout = \"500ms\"\nconnect_budget = \"1s\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"\n[[pool.p.backend]]\naddr = %q\nmax_connections = 1\n", ln.Addr().String())
	p := newLB(t, nil, extra)
	c1 := p.dial(t)
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c1.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	c2 := p.dial(t)
	defer c2.Close()
	time.Sleep(100 * time.Millisecond) // c2 waits for the slot
	ln.Close()                         // the backend goes away: dials are refused
	c1.Close()                         // the slot frees: c2 is dialed, refused, the breaker trips
	(<-held).Close()
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	c2.Read(make([]byte, 8))
	testnet.Eventually(t, "c2 closed", func() bool { return p.server.Active() == 0 })
	for _, lc := range p.server.Closes() {
		var q, r int64
		for i := range relay.QueueResults {
			q += lc.Queued[i]
			r += lc.RecoveryWaits[i]
		}
		t.Logf("queued %v (sum %d), recovery waits %v (sum %d)", lc.Queued, q, lc.RecoveryWaits, r)
		if q != 1 {
			t.Errorf("c2's slot wait counted %d times, want once", q)
		}
	}
	close(held)
	for c := range held {
		c.Close()
	}
}

// with a backup serving, a primary's recovery from an outage of
// every primary probes no other primary: every new client goes to that one.
func TestPrimariesRecoveryWithBackupServing(t *testing.T) {
	backs := []*restartable{newRestartable(t), newRestartable(t), newRestartable(t)}
	bk := startBackend(t)
	extra := "retries = 0\nconnect_timeout = \"300ms\"\nconnect_budget = \"300ms\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"\n"
	for _, r := range backs {
		extra += fmt.Sprintf("[[pool.p.backend]]\naddr = %q\n", r.addr)
	}
	extra += fmt.Sprintf("[[pool.p.backend]]\naddr = %q\nbackup = true\n", bk.Addr)
	p := newLB(t, nil, extra)
	for _, r := range backs {
		b, _ := p.Backend(r.addr)
		for !b.Breaker().Open {
			connect(t, p)
		}
	}
	t.Logf("serving: %v", p.Serving())
	for _, r := range backs {
		r.start()
	}
	b0, _ := p.Backend(backs[0].addr)
	if err := p.Probe(t.Context(), b0); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the probed primary to close", func() bool { return !b0.Breaker().Open })
	time.Sleep(500 * time.Millisecond)
	open := 0
	for _, r := range backs[1:] {
		b, _ := p.Backend(r.addr)
		if b.Breaker().Open {
			open++
		}
	}
	got := map[string]int{}
	for range 12 {
		got[connect(t, p)]++
	}
	t.Logf("other primaries still open: %d; 12 new clients went to %v", open, got)
	if open > 0 {
		t.Errorf("%d primaries left to their 60s cooldowns while every new client goes to the one primary back", open)
	}
}
