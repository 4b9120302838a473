package pool

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
)

// A breaker change made elsewhere (another instance sharing the store, an
// upgrade's old process) reaches a hashing picker that keeps a mask of
// usable backends as soon as the backend's snapshot takes it in: the
// first pick after the refresh that read a close gives the backend its
// clients back, without waiting for the picker's round-robin polling to
// come round to it. Refreshes are made here by hand, so the test is
// exact.
func TestBreakerChangeMadeElsewhereReachesThePicker(t *testing.T) {
	ctx := context.Background()
	var text strings.Builder
	text.WriteString("[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:1\"\npool = \"p\"\n[pool.p]\nalgorithm = \"consistent-hash\"\n[pool.p.health]\nenabled = false\n")
	for i := range 40 {
		fmt.Fprintf(&text, "[[pool.p.backend]]\naddr = \"127.0.0.1:%d\"\n", 20000+i)
	}
	cfg, err := config.Parse("t.toml", []byte(text.String()))
	if err != nil {
		t.Fatal(err)
	}
	store := breaker.NewMemoryStore(nil)
	p, err := New(cfg.Pools["p"], Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	var buf [MaxCandidates]int
	src := netip.MustParseAddrPort("192.0.2.7:40000")
	first := func() int {
		cands, _ := p.Plan(src, buf[:])
		if len(cands) == 0 {
			t.Fatal("no candidate")
		}
		return cands[0]
	}
	// A client whose owner is far from where the polling starts, so only
	// the change itself can bring it back within a pick.
	owner := first()
	for tries := 0; owner < 20; tries++ {
		if tries == 1000 {
			t.Fatal("no client address whose owner is past the 20th backend")
		}
		src = netip.AddrPortFrom(src.Addr().Next(), src.Port())
		owner = first()
	}
	b := p.backends[owner]
	key := p.Name + "/" + b.ID

	store.Follow(key, 0, breaker.State{Generation: 1, Open: true, Cooldown: time.Hour, CooldownLeft: time.Hour})
	if err := b.breaker.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the picks that take in the trip
		if first() == owner {
			t.Fatal("a backend tripped elsewhere still gets the client")
		}
	}
	store.Follow(key, 1, breaker.State{Generation: 2})
	if err := b.breaker.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := first(); got != owner {
		t.Fatalf("the first pick after the close went to backend %d, want the hash owner %d back", got, owner)
	}
}
