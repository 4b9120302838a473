package pool_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A drain's deadline is on the pool's clock: at it, and not a moment
// before, the connections still open are cut (Deps.CutBackend); a drain
// replaced or ended before its deadline cuts nothing at that deadline.
// The clock calls the cut within Advance, so nothing here polls.
func TestDrainDeadlineCutsOnThePoolsClock(t *testing.T) {
	testnet.CheckLeaks(t)
	clk := clock.NewFake(time.Now())
	cut, cutsSoFar := cutRecorder()
	addr := testnet.FreeAddr(t)
	p := runPoolDeps(t, parse(t, poolTOML(t, []string{addr}, "[pool.p.health]\nenabled = false")), pool.Deps{
		Store: breaker.NewMemoryStore(clk), Clock: clk,
		CutBackend: cut,
	})
	ctx := context.Background()
	b := p.At(0)
	open := p.BeginDial(b, false) // in flight: one connection on b
	defer p.EndDial(open, dialer.Success)

	if err := p.Drain(ctx, b, time.Minute); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute - time.Nanosecond)
	if got := cutsSoFar(); len(got) != 0 {
		t.Fatalf("cut %v before the deadline", got)
	}
	clk.Advance(time.Nanosecond)
	if got := cutsSoFar(); !slices.Equal(got, []string{addr}) {
		t.Fatalf("cuts at the deadline %v, want one of %s", got, addr)
	}

	// Replaced: the first deadline passes without a cut, the second cuts.
	p.Drain(ctx, b, time.Minute)
	p.Drain(ctx, b, time.Hour)
	clk.Advance(time.Minute)
	if got := cutsSoFar(); len(got) != 1 {
		t.Fatalf("a replaced drain's deadline cut: %v", got)
	}
	clk.Advance(time.Hour - time.Minute)
	if got := cutsSoFar(); len(got) != 2 {
		t.Fatalf("the replacing drain's deadline made %d cuts in all, want 2", len(got))
	}

	// Ended by Enable: its deadline cuts nothing.
	p.Drain(ctx, b, time.Minute)
	if err := p.Enable(ctx, b); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if got := cutsSoFar(); len(got) != 2 || b.Draining() {
		t.Fatalf("after an enabled drain's deadline: cuts %v, draining %v", got, b.Draining())
	}
}

// A drain handed on (an upgrade's state, a state file) keeps its times:
// its deadline, still ahead, cuts what is open then, on the new pool's
// clock; a connection adopted on a backend whose deadline passed is one
// to cut (Adopt says so), and one adopted on a drain restored without its
// times (an older record's, deadline unknown) is not.
func TestRestoredDrainKeepsItsDeadline(t *testing.T) {
	testnet.CheckLeaks(t)
	clk := clock.NewFake(time.Now())
	cut, cutsSoFar := cutRecorder()
	ahead, passed, untimed := testnet.FreeAddr(t), testnet.FreeAddr(t), testnet.FreeAddr(t)
	since := clk.Now().Add(-time.Minute)
	rt := map[string]pool.Runtime{
		"p/" + ahead:   {Drained: true, ConfiguredWeight: 1, DrainSince: since, DrainDeadline: clk.Now().Add(30 * time.Second)},
		"p/" + passed:  {Drained: true, ConfiguredWeight: 1, DrainSince: since, DrainDeadline: clk.Now().Add(-time.Second)},
		"p/" + untimed: {Drained: true, ConfiguredWeight: 1},
	}
	p := runPoolDeps(t, parse(t, poolTOML(t, []string{ahead, passed, untimed}, "[pool.p.health]\nenabled = false")), pool.Deps{
		Store: breaker.NewMemoryStore(clk), Clock: clk, Runtime: rt,
		CutBackend: cut,
	})
	for i := range 2 {
		b := p.At(i)
		d, ok := b.DrainState()
		if !ok || !d.Since.Equal(since) || !d.Deadline.Equal(rt["p/"+b.Addr].DrainDeadline) {
			t.Fatalf("backend %s restored with drain %+v (%v), want since %v until %v", b.Addr, d, ok, since, rt["p/"+b.Addr].DrainDeadline)
		}
		open := p.BeginDial(b, true) // one connection on each
		defer p.EndDial(open, dialer.Success)
	}
	clk.Advance(30*time.Second - time.Nanosecond)
	if got := cutsSoFar(); len(got) != 0 {
		t.Fatalf("cut %v before the restored deadline", got)
	}
	clk.Advance(time.Nanosecond)
	clk.Advance(time.Hour)
	if got := cutsSoFar(); !slices.Equal(got, []string{ahead}) {
		t.Fatalf("cuts %v, want one of %s at its restored deadline and none of the passed one", got, ahead)
	}
	if !p.At(2).Draining() {
		t.Fatal("a drain restored without its times is not a drain")
	}
	for i, want := range []bool{true, true, false} { // ahead's deadline has passed by now too
		b := p.At(i)
		if cut := p.Adopt(b); cut != want {
			t.Errorf("a connection adopted on %s: cut %v, want %v", b.Addr, cut, want)
		}
		p.EndRelay(b)
	}
}

// cutRecorder is a Deps.CutBackend that records the addresses it is
// given, and what it has recorded so far.
func cutRecorder() (cut func(*pool.Backend), soFar func() []string) {
	var mu sync.Mutex
	var cuts []string
	cut = func(b *pool.Backend) {
		mu.Lock()
		cuts = append(cuts, b.Addr)
		mu.Unlock()
	}
	soFar = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(cuts)
	}
	return cut, soFar
}
