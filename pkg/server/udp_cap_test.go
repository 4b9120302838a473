package server

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// A UDP backend's max_connections caps its sessions: the cap is taken by
// compare-and-swap when a session dials, so clients past it go to the other
// backend, and once every backend is full a new client's datagram is
// dropped as no_backend rather than sent past a cap.
func TestUDPBackendMaxConnectionsCapsSessions(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	lb := startUDPLB(t, []string{a.Addr, b.Addr}, udpOpts{pool: func(p *config.Pool) {
		p.Backends[0].MaxConnections = 2
		p.Backends[1].MaxConnections = 1
	}})
	seen := map[string]int{}
	for range 3 {
		seen[who(t, udpClient(t, lb.addr))]++
	}
	if seen["a"] != 2 || seen["b"] != 1 {
		t.Fatalf("three sessions went %v, want a:2 b:1 (each backend up to its cap)", seen)
	}
	// Every backend is full: the fourth client gets no session.
	c := udpClient(t, lb.addr)
	if _, err := askOnce(c, []byte("hello"), 300*time.Millisecond); err == nil {
		t.Fatal("a fourth session was served past both caps")
	}
	if n := lb.front.Drops[udpsession.DropNoBackend].Load(); n == 0 {
		t.Errorf("no no_backend drop counted")
	}
	if got := lb.pool.At(0).Active() + lb.pool.At(1).Active(); got != 3 {
		t.Errorf("%d sessions counted on the backends, want 3", got)
	}
}
