package pool_test

import (
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The UDP default check: a backend that answers nothing l4lb knows to send
// and has no TCP port stays up; a dead one (ICMP port unreachable) goes
// down, and comes back with it.
func TestUDPICMPHealth(t *testing.T) {
	back := newUDPBackend(t)
	p := checkPool(t, config.ProtocolUDP, config.Health{Type: config.HealthICMP}, back.addr)
	b := p.Backends()[0]
	testnet.Eventually(t, "a passing health check", func() bool { ok, _ := b.Dials(pool.DialHealth); return ok > 1 })
	if !b.HealthUp() {
		t.Fatal("a live UDP backend is health-down under icmp checks")
	}
	back.stop()
	testnet.Eventually(t, "the dead backend to go health-down", func() bool { return !b.HealthUp() })
	back.start()
	testnet.Eventually(t, "the backend back up", b.HealthUp)
}

func TestICMPHealthIsForUDPPools(t *testing.T) {
	cfg := config.DefaultPool("t")
	cfg.Health.Type = config.HealthICMP
	b := config.DefaultBackend()
	b.Addr = "127.0.0.1:9"
	cfg.Backends = []config.Backend{b}
	_, err := pool.New(cfg, pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err == nil || !strings.Contains(err.Error(), "icmp health checks are for UDP pools") {
		t.Fatalf("a TCP pool with icmp checks: %v, want refused", err)
	}
}
