package pool

import (
	"net/netip"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pick"
)

// afterPick runs after once, right after the first Pick: what another
// event loop may do between a plan's pick and the rest of the plan.
type afterPick struct {
	pick.Picker
	after func()
}

func (a *afterPick) Pick(src netip.AddrPort, n int, dst []int) []int {
	dst = a.Picker.Pick(src, n, dst)
	if f := a.after; f != nil {
		a.after = nil
		f()
	}
	return dst
}

func internalPool(t *testing.T, text string) *Pool {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg.Pools["p"], Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every backend is at its max_connections when the plan picks; another
// loop's relay ends before the plan goes on. The pool is not all-down:
// the client must get the freed backend as a client dial within its cap,
// never a force-try (which ignores the cap) at a backend still full.
func TestPlanSlotFreedAfterThePickIsNoForceTry(t *testing.T) {
	p := internalPool(t, `
[[listener]]
name = "l"
bind = "127.0.0.1:1"
pool = "p"
[pool.p]
algorithm = "round-robin"
[pool.p.health]
enabled = false
[[pool.p.backend]]
addr = "127.0.0.1:1001"
max_connections = 1
[[pool.p.backend]]
addr = "127.0.0.1:1002"
max_connections = 1
`)
	for _, b := range p.Backends() {
		d, ok := p.TryBeginDial(b, false)
		if !ok {
			t.Fatal("setup: no slot")
		}
		p.EndDial(d, dialer.Success)
	}
	src := netip.MustParseAddrPort("192.0.2.1:5000")
	inner := *p.primaries.pick.Load()
	var freed int
	var racing pick.Picker = &afterPick{Picker: inner, after: func() {
		// The backend the force-try would not choose frees its slot.
		order := inner.Order(src, nil)
		freed = order[1]
		p.EndRelay(p.backends[freed])
	}}
	p.primaries.pick.Store(&racing)

	var buf [MaxCandidates]int
	cands, force := p.Plan(src, buf[:0])
	if force {
		t.Errorf("Plan force-tries %v while backend %d has a free slot", cands, freed)
	}
	if len(cands) != 1 || cands[0] != freed {
		t.Fatalf("Plan = %v, want the backend with the free slot, %d", cands, freed)
	}
	if _, ok := p.TryBeginDial(p.At(cands[0]), force); !ok {
		t.Fatal("the planned backend has no slot")
	}
	for _, b := range p.Backends() {
		if b.Active() > b.MaxConnections() {
			t.Errorf("%s: %d connections, max_connections %d", b.Addr, b.Active(), b.MaxConnections())
		}
	}
}
