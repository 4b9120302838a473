package pool

import (
	"context"
	"errors"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// connect_budget bounds all attempts of one client together: three
// backends that drop SYNs, connect_timeout 1s and two retries would keep a
// client 3s; a 1.5s budget gives the first dial its full second, cuts the
// second short and never starts the third. The cut dial proves nothing
// about its backend and is not blamed.
func TestConnectBudgetBoundsAllAttempts(t *testing.T) {
	frozen := []string{testnet.FrozenBackend(t), testnet.FrozenBackend(t), testnet.FrozenBackend(t)}
	p := newPool(t, frozen, "algorithm = \"round-robin\"\nretries = 2\nconnect_timeout = \"1s\"\nconnect_budget = \"1500ms\"\n"+
		"[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 100")
	_, err := p.Connect(context.Background(), client, nil)
	if !errors.Is(err, ErrNoBackend) || !errors.Is(err, ErrBudget) {
		t.Fatalf("Connect error %v, want no backend because the budget was spent", err)
	}
	var failed int64
	for _, a := range frozen {
		_, f := dials(p, a, DialClient)
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
