package pool_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The pool's side of a dial made by the event loop (Plan, BeginDial,
// EndDial, Pending, EndRelay), without sockets: the backends' addresses
// are never dialed here, the tests report the outcomes themselves.

var client = netip.MustParseAddrPort("127.0.0.1:40000")

// fail records one failed client dial on b.
func fail(p *pool.Pool, b *pool.Backend) {
	p.EndDial(p.BeginDial(b, false), dialer.Failure)
}

func TestPlanListsUsableCandidatesOrTheOneToForceTry(t *testing.T) {
	addrs := []string{testnet.FreeAddr(t), testnet.FreeAddr(t), testnet.FreeAddr(t)}
	// The cooldowns left tell the force-try apart: the Store and the
	// breakers keep them on a clock moved by hand between the trips. The
	// pool does not Run: its breakers' snapshots change only by the calls
	// below (no refresh read before a move and stamped after it, no probe
	// that Enable asks for), so the moves order the cooldowns exactly.
	testnet.CheckLeaks(t)
	clk := clock.NewFake(time.Now())
	p, err := pool.New(parse(t, poolTOML(t, addrs, "algorithm = \"round-robin\"\nretries = 2\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")).Pools["p"],
		pool.Deps{Store: breaker.NewMemoryStore(clk), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var buf [pool.MaxCandidates]int
	cands, force := p.Plan(client, buf[:0])
	if force || len(cands) != 3 {
		t.Fatalf("plan %v force %v, want 1+retries = 3 candidates", cands, force)
	}
	if s := slices.Sorted(slices.Values(cands)); !slices.Equal(s, []int{0, 1, 2}) {
		t.Fatalf("plan %v, want three distinct backends", cands)
	}

	// A tripped backend is no candidate.
	fail(p, p.At(0))
	for range 6 {
		cands, force = p.Plan(client, buf[:0])
		if force || len(cands) != 2 || slices.Contains(cands, 0) {
			t.Fatalf("plan %v force %v with backend 0 tripped, want the other two", cands, force)
		}
	}

	// All down: exactly one force-try, of the backend closest to recovery.
	clk.Advance(time.Second)
	fail(p, p.At(1))
	clk.Advance(time.Second)
	fail(p, p.At(2))
	for range 3 {
		cands, force = p.Plan(client, buf[:0])
		if !force || !slices.Equal(cands, []int{0}) {
			t.Fatalf("all down: plan %v force %v, want a force-try of backend 0 (tripped first)", cands, force)
		}
	}
	// A failed force-try changes nothing; it counts as kind force.
	b0 := p.At(0)
	p.EndDial(p.BeginDial(b0, true), dialer.Failure)
	if _, f := b0.Dials(pool.DialForce); f != 1 || b0.Breaker().Generation != 1 || !b0.Breaker().Open || b0.ProbeFailures() != 0 {
		t.Fatalf("failed force-try: %d failed force dials, breaker %+v; want 1, still open at generation 1", f, b0.Breaker())
	}
	if _, f := b0.Dials(pool.DialClient); f != 1 {
		t.Fatalf("a force-try counted as a client dial (%d failed)", f)
	}

	// Never a disabled backend, even all down.
	ctx := context.Background()
	if err := p.Disable(ctx, b0); err != nil {
		t.Fatal(err)
	}
	if cands, force = p.Plan(client, buf[:0]); !force || !slices.Equal(cands, []int{1}) {
		t.Fatalf("backend 0 disabled: plan %v force %v, want a force-try of backend 1", cands, force)
	}
	p.Disable(ctx, p.At(1))
	p.Disable(ctx, p.At(2))
	if cands, force = p.Plan(client, buf[:0]); len(cands) != 0 {
		t.Fatalf("every backend disabled: plan %v force %v, want nothing to try", cands, force)
	}

	// A successful force-try is recovery, before the cooldown ends.
	p.Enable(ctx, b0)
	d := p.BeginDial(b0, true)
	p.EndDial(d, dialer.Success)
	if st := b0.Breaker(); st.Open {
		t.Fatalf("successful force-try did not close the breaker: %+v", st)
	}
	p.EndRelay(b0)
}

// A dial is load from BeginDial: a failed or called-off one gives its count
// back at once, a connected one keeps it until its relay ends.
func TestActiveCountsFromBeginDialToEndRelay(t *testing.T) {
	p := newPool(t, []string{testnet.FreeAddr(t)}, "[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1000")
	b := p.Backends()[0]
	for _, o := range []dialer.Outcome{dialer.Failure, dialer.Local} {
		d := p.BeginDial(b, false)
		if b.Active() != 1 {
			t.Fatalf("active with a dial in flight = %d, want 1", b.Active())
		}
		p.EndDial(d, o)
		if b.Active() != 0 {
			t.Fatalf("active after a dial ended %v = %d, want 0", o, b.Active())
		}
	}
	if ok, f := b.Dials(pool.DialClient); ok != 0 || f != 1 {
		t.Fatalf("dials %d ok / %d failed, want 0 / 1 (local trouble is neither)", ok, f)
	}
	d := p.BeginDial(b, false)
	if s := p.Pending(d); s != nil {
		t.Fatal("without count_early_reset a connect settles at once, yet Pending left it open")
	}
	if ok, _ := b.Dials(pool.DialClient); ok != 1 || b.Active() != 1 {
		t.Fatalf("after a connect: %d ok dials, active %d; want 1 and 1", ok, b.Active())
	}
	p.EndRelay(b)
	if b.Active() != 0 {
		t.Fatalf("active after the relay = %d, want 0", b.Active())
	}
}

// The seed scenario without sockets: a dial begun before the trip that
// connects after it is stale evidence and leaves the breaker open.
func TestPreTripDialEndingAfterTheTripIsStale(t *testing.T) {
	p := newPool(t, []string{testnet.FreeAddr(t)}, "retries = 0\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 3\ncooldown = \"120s\"")
	b := p.Backends()[0]
	a := p.BeginDial(b, false) // generation 0
	for range 3 {
		fail(p, b)
	}
	if st := b.Breaker(); !st.Open || st.Generation != 1 {
		t.Fatalf("after 3 failed dials: %+v, want open at generation 1", st)
	}
	p.EndDial(a, dialer.Success)
	if st := b.Breaker(); !st.Open || st.Generation != 1 {
		t.Fatalf("late success of a pre-trip dial changed the breaker: %+v", st)
	}
	if ok, _ := b.Dials(pool.DialClient); ok != 1 || b.StaleResults() != 1 {
		t.Fatalf("%d ok dials, %d stale results; want 1 and 1", ok, b.StaleResults())
	}
	p.EndRelay(b)
}

// With count_early_reset a connect's result waits for the relay's verdict,
// recorded once, in the counters and with the breaker alike.
func TestPendingSettlesOnce(t *testing.T) {
	p := newPool(t, []string{testnet.FreeAddr(t)}, "[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncount_early_reset = true")
	b := p.Backends()[0]
	s := p.Pending(p.BeginDial(b, false))
	if s == nil {
		t.Fatal("count_early_reset: Pending settled at connect")
	}
	if ok, f := b.Dials(pool.DialClient); ok+f != 0 || b.Breaker().Open {
		t.Fatalf("dials %d ok / %d failed before the verdict, want none recorded", ok, f)
	}
	s.Settle(dialer.Failure) // reset before the first byte
	s.Settle(dialer.Success) // too late: already settled
	if ok, f := b.Dials(pool.DialClient); ok != 0 || f != 1 || !b.Breaker().Open {
		t.Fatalf("dials %d ok / %d failed, breaker %+v; want 0 / 1 and open", ok, f, b.Breaker())
	}
	if b.Active() != 1 {
		t.Fatalf("active %d while the relay is open, want 1", b.Active())
	}
	p.EndRelay(b)

	// A force-try's verdict counts as a force dial.
	fs := p.Pending(p.BeginDial(b, true))
	fs.Settle(dialer.Failure)
	if _, f := b.Dials(pool.DialForce); f != 1 || b.Breaker().Generation != 1 {
		t.Fatalf("force-try reset before a byte: %d failed force dials, breaker %+v; want 1, unchanged", f, b.Breaker())
	}
	p.EndRelay(b)
	var none *pool.Settlement
	none.Settle(dialer.Failure) // a dial settled at connect has nothing left
	if b.Active() != 0 {
		t.Fatalf("active %d at the end, want 0", b.Active())
	}
}

func TestKeyForHashesTheServerNameWithHashKeySNI(t *testing.T) {
	addr := testnet.FreeAddr(t)
	text := fmt.Sprintf("[[listener]]\nname = \"l\"\nbind = %q\npool = \"p\"\n[[listener.route]]\nsni = [\"api.test\"]\npool = \"p\"\n"+
		"[pool.p]\nalgorithm = \"maglev\"\nhash_key = \"sni\"\n[[pool.p.backend]]\naddr = %q\n", testnet.FreeAddr(t), addr)
	sni := runPoolOn(t, nil, parse(t, text))
	a, b := netip.MustParseAddrPort("192.0.2.1:1000"), netip.MustParseAddrPort("198.51.100.2:2000")
	if sni.KeyFor(a, "api.test") != sni.KeyFor(b, "api.test") {
		t.Fatal("one name from two clients hashed apart")
	}
	if sni.KeyFor(a, "api.test") == sni.KeyFor(a, "web.test") {
		t.Fatal("two names hashed alike")
	}
	if sni.KeyFor(a, "") != a {
		t.Fatal("a client without a name is not hashed by its address")
	}
	ip := runPoolOn(t, nil, parse(t, poolTOML(t, []string{addr}, "algorithm = \"maglev\"")))
	if ip.KeyFor(a, "api.test") != a {
		t.Fatal("a source-ip pool hashed the name")
	}
}
