package pool_test

import (
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/dialer"
)

// The seed scenario across a binary upgrade: a verdict still open when
// its connection is handed over carries the generation its dial captured.
// Settled in the new process after a trip there, it is stale evidence and
// leaves the breaker open, as it would have in the old one.
func TestResumedVerdictOfAPreTripDialIsStale(t *testing.T) {
	cfg := "retries = 0\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 3\ncooldown = \"120s\"\ncount_early_reset = true"
	addr := testnet.FreeAddr(t)
	old, next := newPool(t, []string{addr}, cfg), newPool(t, []string{addr}, cfg)
	ob, nb := old.Backends()[0], next.Backends()[0]

	s := old.Pending(old.BeginDial(ob, false)) // generation 0, result open
	force, gen, ok := s.Open()
	if !ok || force || gen != 0 {
		t.Fatalf("open verdict: force %v generation %d ok %v; want false 0 true", force, gen, ok)
	}
	old.Detach(ob)
	if ob.Active() != 0 {
		t.Fatalf("detached: the old backend counts %d", ob.Active())
	}

	next.Adopt(nb)
	resumed := next.Resume(nb, force, gen)
	for range 3 {
		fail(next, nb)
	}
	if st := nb.Breaker(); !st.Open || st.Generation != 1 {
		t.Fatalf("after 3 failed dials: %+v, want open at generation 1", st)
	}
	resumed.Settle(dialer.Success)
	if st := nb.Breaker(); !st.Open || st.Generation != 1 {
		t.Fatalf("a resumed pre-trip verdict changed the breaker: %+v", st)
	}
	if nb.StaleResults() != 1 {
		t.Fatalf("%d stale results, want 1", nb.StaleResults())
	}
	if _, _, ok := resumed.Open(); ok {
		t.Fatal("a settled verdict still reads as open")
	}
	if nb.Active() != 1 {
		t.Fatalf("the adopted connection counts %d, want 1", nb.Active())
	}
	next.EndRelay(nb)
}

// An adopted connection counts even past max_connections: it is open
// already, and refusing it would cut it.
func TestAdoptCountsPastTheCap(t *testing.T) {
	addr := testnet.FreeAddr(t)
	p := newPool(t, nil, "[pool.p.health]\nenabled = false\n[[pool.p.backend]]\naddr = \""+addr+"\"\nmax_connections = 1")
	b := p.Backends()[0]
	p.Adopt(b)
	p.Adopt(b)
	if b.Active() != 2 || !b.Full() {
		t.Fatalf("two adopted on a cap of 1: active %d full %v", b.Active(), b.Full())
	}
	if got, ok := p.ByIdentity(b.ID); !ok || got != b {
		t.Fatalf("ByIdentity(%q) = %v, %v", b.ID, got, ok)
	}
	p.EndRelay(b)
	p.EndRelay(b)
}
