package pool_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A reload builds the new pool from the old one: what each kept backend
// knew stays, what is new is checked before use.
func TestReloadCarriesBackendsByIdentity(t *testing.T) {
	build := reloads(t, breaker.NewMemoryStore(nil))
	const health = "[pool.p.health]\ninterval = \"1h\"\ntimeout = \"1s\"\n[pool.p.breaker]\nfailures = 1\n"
	old := build(poolTOML(t, []string{"127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"}, health), nil)
	kept, disabled, tripped := old.Backends()[0], old.Backends()[1], old.Backends()[2]

	// Load and counts on the kept backend.
	d := old.BeginDial(kept, false)
	old.EndDial(d, dialer.Success) // one relay open on it
	kept.Meter.ToBackend.Add(1234)
	// An operator's disable, and a tripped breaker.
	if err := old.Disable(context.Background(), disabled); err != nil {
		t.Fatal(err)
	}
	old.EndDial(old.BeginDial(tripped, false), dialer.Failure)
	trippedGen := tripped.Breaker().Generation
	if !tripped.Breaker().Open {
		t.Fatal("setup: one failure with failures = 1 did not trip the breaker")
	}

	// The new file reorders the pool, keeps the three, adds one.
	next := build(poolTOML(t, []string{"127.0.0.1:1003", "127.0.0.1:1004", "127.0.0.1:1002", "127.0.0.1:1001"}, health), old)
	byAddr := map[string]*pool.Backend{}
	for _, b := range next.Backends() {
		byAddr[b.Addr] = b
	}
	if b := byAddr["127.0.0.1:1001"]; b.Active() != 1 || b.Meter.ToBackend.Load() != 1234 {
		t.Errorf("kept backend: active %d, bytes %d; want its open relay and its bytes carried (1, 1234)", b.Active(), b.Meter.ToBackend.Load())
	}
	if ok, _ := byAddr["127.0.0.1:1001"].Dials(pool.DialClient); ok != 1 {
		t.Errorf("kept backend: %d successful dials counted, want the 1 from before the reload", ok)
	}
	if st := byAddr["127.0.0.1:1002"].Breaker(); !st.Disabled {
		t.Error("a disabled backend was enabled by a reload")
	}
	if st := byAddr["127.0.0.1:1003"].Breaker(); !st.Open || st.Generation != trippedGen {
		t.Errorf("tripped backend after the reload: %+v, want open at generation %d", st, trippedGen)
	}
	if b := byAddr["127.0.0.1:1004"]; b.HealthUp() || b.Usable() {
		t.Error("a backend the reload added is usable before any health check passed")
	}
	if !byAddr["127.0.0.1:1001"].HealthUp() {
		t.Error("a kept healthy backend came back health-down")
	}
	// The old pool's connections end on their own backend objects: the
	// count they give back is the one the new pool sees.
	old.EndRelay(kept)
	if got := byAddr["127.0.0.1:1001"].Active(); got != 0 {
		t.Errorf("after the old relay ended the new pool sees %d active, want 0", got)
	}
}

func TestInitialHealthSeedsBackendsNotCarried(t *testing.T) {
	cfg := parse(t, poolTOML(t, []string{"127.0.0.1:1001", "127.0.0.1:1002"}, "[pool.p.health]\ninterval = \"1h\"\ntimeout = \"1s\"\n"))
	p, err := pool.New(cfg.Pools["p"], pool.Deps{Store: breaker.NewMemoryStore(nil),
		InitialHealth: map[string]bool{"127.0.0.1:1002": false}})
	if err != nil {
		t.Fatal(err)
	}
	got := p.HealthStates()
	if !got["127.0.0.1:1001"] || got["127.0.0.1:1002"] {
		t.Errorf("health states %v, want 1001 up (fresh start) and 1002 down (handed over)", got)
	}
}

// After a reload the old pool's backends answer for their successors: a
// backend the reload dropped, or moved to a new address, is not usable to
// what still holds the old one (a UDP session moves on).
func TestHandOverRetiresDroppedBackends(t *testing.T) {
	build := reloads(t, breaker.NewMemoryStore(nil))
	old := build(poolTOML(t, []string{"127.0.0.1:1001", "127.0.0.1:1002"}, "[pool.p.health]\nenabled = false\n"), nil)
	next := build(poolTOML(t, []string{"127.0.0.1:1001"}, "[pool.p.health]\nenabled = false\n"), old)
	kept, dropped := old.Backends()[0], old.Backends()[1]
	old.HandOver(next)
	if !kept.Usable() {
		t.Error("a kept backend reads unusable through its old pool")
	}
	if dropped.Usable() {
		t.Error("a backend the reload dropped still reads usable")
	}
	if err := next.Disable(context.Background(), next.Backends()[0]); err != nil {
		t.Fatal(err)
	}
	if kept.Usable() {
		t.Error("the old pool's backend missed its successor's disable")
	}
	next.HandOver(nil) // the pool removed by a reload
	if next.Backends()[0].Usable() {
		t.Error("a backend of a removed pool still reads usable")
	}
}

// A kept backend's breaker goes on counting the failures from before the
// reload: under frequent reloads a steadily failing backend still trips.
// One that moved to another address starts a fresh window.
func TestReloadCarriesTheFailureWindow(t *testing.T) {
	store := breaker.NewMemoryStore(nil)
	const text = "[pool.p.breaker]\nfailures = 3\nwindow = \"1h\"\n[pool.p.health]\nenabled = false\n"
	build := func(addrs []string, prev *pool.Pool) *pool.Pool {
		t.Helper()
		p, err := pool.New(parse(t, poolTOML(t, addrs, text)).Pools["p"], pool.Deps{Store: store, Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fail := func(p *pool.Pool, b *pool.Backend) { p.EndDial(p.BeginDial(b, false), dialer.Failure) }

	old := build([]string{"127.0.0.1:1001"}, nil)
	fail(old, old.Backends()[0])
	mid := build([]string{"127.0.0.1:1001"}, old)
	fail(mid, mid.Backends()[0])
	last := build([]string{"127.0.0.1:1001"}, mid)
	b := last.Backends()[0]
	if b.Breaker().Open {
		t.Fatal("tripped at two failures with failures = 3")
	}
	fail(last, b)
	if !b.Breaker().Open {
		t.Fatal("three failures across two reloads did not trip the breaker")
	}
}

// An operator's weight survives a reload that leaves the backend's weight
// in the file alone, and gives way, with one line saying so, to a reload
// that changes it: the file's edit is the newer word.
func TestReloadLogsTheFileWeightReplacingTheOperators(t *testing.T) {
	store := breaker.NewMemoryStore(nil)
	rec := &logRecorder{}
	build := func(weight int, prev *pool.Pool) *pool.Pool {
		t.Helper()
		text := poolTOML(t, nil, "") + fmt.Sprintf("[[pool.p.backend]]\naddr = \"127.0.0.1:1001\"\nweight = %d\n", weight)
		p, err := pool.New(parse(t, text).Pools["p"], pool.Deps{Store: store, Previous: prev, Logger: slog.New(rec)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := build(2, nil)
	if err := old.SetWeight(context.Background(), old.Backends()[0], 7); err != nil {
		t.Fatal(err)
	}
	same := build(2, old)
	if w := same.Backends()[0].Weight(); w != 7 {
		t.Fatalf("after a reload that left the file's weight: %d, want the operator's 7", w)
	}
	if n := len(rec.messages("the file's new weight replaces the operator's")); n != 0 {
		t.Fatalf("%d replacement lines for a weight the file did not change", n)
	}
	edited := build(3, same)
	if w := edited.Backends()[0].Weight(); w != 3 {
		t.Fatalf("after a reload that changed the file's weight: %d, want the file's 3", w)
	}
	lines := rec.messages("the file's new weight replaces the operator's")
	if len(lines) != 1 {
		t.Fatalf("%d replacement lines, want 1", len(lines))
	}
	for k, want := range map[string]string{"backend": "127.0.0.1:1001", "operator_weight": "7", "file_weight_was": "2", "file_weight": "3"} {
		if got := lines[0][k]; got != want {
			t.Errorf("the replacement line's %s = %q, want %q", k, got, want)
		}
	}
}
