package pool_test

import (
	"errors"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// connect_budget bounds all attempts of one client together: three
// backends that drop SYNs, connect_timeout 1s and two retries would keep a
// client 3s; a 1.5s budget gives the first dial its full second, cuts the
// second short and never starts the third. The cut dial proves nothing
// about its backend and is not blamed.
func TestConnectBudgetBoundsAllAttempts(t *testing.T) {
	frozen := []string{testnet.FrozenBackend(t), testnet.FrozenBackend(t), testnet.FrozenBackend(t)}
	p := newLB(t, frozen, "algorithm = \"round-robin\"\nretries = 2\nconnect_timeout = \"1s\"\nconnect_budget = \"1500ms\"\n"+
		"[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 100")
	c := p.dial(t)
	if err := readToEnd(t, c); err != nil {
		t.Fatalf("client turned away with %v, want a clean close", err)
	}
	c.Close()
	p.idle(t)
	if s := p.stats(); s.Failed != 1 || s.OK != 0 || s.Rejected != 0 {
		t.Fatalf("listener counters %+v, want the client counted failed", s)
	}
	errs := p.logs.errors("client not served")
	if len(errs) != 1 || !errors.Is(errs[0], pool.ErrNoBackend) || !errors.Is(errs[0], pool.ErrBudget) {
		t.Fatalf("client not served because of %v, want no backend because the budget was spent", errs)
	}
	var failed int64
	for _, a := range frozen {
		_, f := dials(p.Pool, a, pool.DialClient)
		failed += f
	}
	if failed != 1 {
		t.Fatalf("%d dials blamed on their backends, want 1 (only the dial that had its full connect_timeout)", failed)
	}
	for _, b := range p.Backends() {
		if b.Active() != 0 {
			t.Fatalf("backend %s still counts %d connections", b.Addr, b.Active())
		}
	}
}
