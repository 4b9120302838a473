package pool

import (
	"net/netip"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
)

// A primary whose coming back no notice told (the count says it is out,
// it is usable) is found by the plans' polling within
// pollEvery*len(primaries) plans, and the primaries serve again.
func TestAMissedNoticeIsFoundByPolling(t *testing.T) {
	cfg := config.DefaultPool("p")
	cfg.Health.Enabled = false
	for i, addr := range []string{"127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"} {
		b := config.DefaultBackend()
		b.Addr, b.Backup = addr, i == 2
		cfg.Backends = append(cfg.Backends, b)
	}
	p, err := New(cfg, Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	// Both primaries out as the flags and the count have it, with no
	// notice of their coming back to follow.
	p.rotMu.Lock()
	for _, b := range p.backends[:2] {
		b.usable.Store(false)
		b.rotating = false
	}
	p.primaries.inRotation.Store(0)
	p.logServing()
	p.rotMu.Unlock()
	if s := p.Serving(); s != ServingBackup {
		t.Fatalf("setup: serving %v, want backup", s)
	}
	var buf [MaxCandidates]int
	src := netip.MustParseAddrPort("192.0.2.1:40000")
	for range pollEvery * 2 {
		p.Plan(src, buf[:0])
	}
	if s := p.Serving(); s != ServingPrimary {
		t.Fatalf("after %d plans: serving %v, want primary (the poll re-read a primary)", pollEvery*2, s)
	}
	if cands, _ := p.Plan(src, buf[:0]); len(cands) == 0 || p.backends[cands[0]].backup {
		t.Fatalf("plan %v: want a primary first", cands)
	}
}

// A pool with no backend at all (each set empty, no picker) is all down:
// nothing to try, no force-try, not Full, serving none.
func TestAPoolWithNoBackendPlansNothing(t *testing.T) {
	cfg := config.DefaultPool("p")
	p, err := New(cfg, Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	var buf [MaxCandidates]int
	if cands, force := p.Plan(netip.MustParseAddrPort("192.0.2.1:40000"), buf[:0]); len(cands) != 0 || !force || p.Full() || p.Serving() != ServingNone {
		t.Fatalf("plan %v force %v full %v serving %v; want nothing to try, as all down", cands, force, p.Full(), p.Serving())
	}
}
