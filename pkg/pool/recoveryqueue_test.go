package pool_test

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// holdingBackend accepts, says its address and keeps each connection
// open until its client's side ends; stop closes its listener only.
type holdingBackend struct {
	addr string
	ln   net.Listener
	mu   sync.Mutex
	held []net.Conn
	wg   sync.WaitGroup
}

func startHolding(t *testing.T, addr string) *holdingBackend {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdingBackend{addr: addr, ln: ln}
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(addr + "\n"))
			h.mu.Lock()
			h.held = append(h.held, c)
			h.mu.Unlock()
			h.wg.Go(func() {
				io.Copy(io.Discard, c) // until the client's FIN comes through
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		h.stop()
		h.mu.Lock()
		for _, c := range h.held {
			c.Close()
		}
		h.mu.Unlock()
		h.wg.Wait()
	})
	return h
}

func (h *holdingBackend) stop() { h.ln.Close() }

// connect_budget is "all attempts of one client together": a client that
// waited for recovery, then for a slot, dials on with what it had left,
// its one force-try (rule 6) spent. Given a fresh budget after the slot
// wait, it made a second force-try.
func TestBudgetOutlastsTheSlotQueue(t *testing.T) {
	addr := testnet.FreeAddr(t)
	p := newLB(t, nil, "retries = 0\nconnect_budget = \"3s\"\nqueue_timeout = \"30s\"\n[pool.p.health]\nenabled = false\n"+
		"[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"\n[[pool.p.backend]]\naddr = \""+addr+"\"\nmax_connections = 1")
	b := p.Backends()[0]

	// A: refused, trips the breaker, refused again at its force-try, and
	// waits for recovery.
	a := p.dial(t)
	defer a.Close()
	testnet.Eventually(t, "A's force-try", func() bool { _, f := b.Dials(pool.DialForce); return f == 1 })

	// The backend comes back; C's force-try closes the breaker and C
	// holds the one slot: A, released, waits for the slot.
	back := startHolding(t, addr)
	c := p.dial(t)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != addr+"\n" {
		t.Fatalf("C: %q %v", line, err)
	}
	testnet.Eventually(t, "A to wait for the slot", func() bool {
		for _, lc := range p.server.Closes() {
			if lc.RecoveryWaits[0]+lc.RecoveryWaits[1]+lc.RecoveryWaits[2] > 0 {
				return true
			}
		}
		return false
	})

	// The backend goes again, and C leaves: A dials, is refused and trips
	// the breaker. Its force-try is spent: it waits out what is left of
	// its budget, and is refused.
	back.stop()
	c.Close()
	a.SetReadDeadline(time.Now().Add(30 * time.Second))
	if line, _ := bufio.NewReader(a).ReadString('\n'); line != "" {
		t.Fatalf("A got %q from a backend that is gone", line)
	}
	if ok, f := b.Dials(pool.DialForce); ok != 1 || f != 1 {
		t.Fatalf("force-tries: %d ok, %d failed; want C's that closed the breaker and A's one refused (a second by A: its budget began again after the slot wait)", ok, f)
	}
}
