package pool_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

func fleetDrain(v uint64, drained bool, left time.Duration) pool.Fleet {
	return pool.Fleet{Drain: &pool.FleetDrain{Version: v, Drained: drained, Timeout: left, Left: left}}
}

func fleetWeight(v uint64, w *int, configured int) pool.Fleet {
	return pool.Fleet{Weight: &pool.FleetWeight{Version: v, Weight: w, Configured: configured}}
}

func intp(n int) *int { return &n }

// The fleet's drain takes the backend out at once and resets what is open
// at the time left; an older record read late changes nothing; the
// fleet's undrain ends it, but not a drain this instance made itself.
func TestApplyFleetDrain(t *testing.T) {
	testnet.CheckLeaks(t)
	clk := clock.NewFake(time.Now())
	var cuts atomic.Int64
	addr := testnet.FreeAddr(t)
	p := runPoolDeps(t, parse(t, poolTOML(t, []string{addr}, "[pool.p.health]\nenabled = false")), pool.Deps{
		Store: breaker.NewMemoryStore(clk), Clock: clk,
		CutBackend: func(*pool.Backend) { cuts.Add(1) },
	})
	ctx := context.Background()
	b := p.At(0)
	open := p.BeginDial(b, false)
	defer p.EndDial(open, dialer.Success)

	if err := p.ApplyFleet(b, fleetDrain(5, true, time.Minute)); err != nil {
		t.Fatal(err)
	}
	d, ok := b.DrainState()
	if !ok || d.Scope != pool.ScopeFleet || d.Deadline.Sub(d.Since) != time.Minute || b.InRotation() {
		t.Fatalf("after the fleet's drain: %+v %v, in rotation %v", d, ok, b.InRotation())
	}
	p.ApplyFleet(b, fleetDrain(4, false, 0)) // older: read late
	if !b.Draining() {
		t.Fatal("an older undrain record ended the fleet's drain")
	}
	clk.Advance(time.Minute)
	if cuts.Load() != 1 {
		t.Fatalf("%d cuts at the fleet drain's deadline, want 1", cuts.Load())
	}
	p.ApplyFleet(b, fleetDrain(6, false, 0))
	if b.Draining() || !b.InRotation() {
		t.Fatal("the fleet's undrain left the backend out")
	}

	// This instance's own drain outlives the fleet's undrain.
	p.Drain(ctx, b, time.Hour)
	p.ApplyFleet(b, fleetDrain(7, true, time.Minute))
	p.ApplyFleet(b, fleetDrain(8, false, 0))
	if d, ok := b.DrainState(); !ok || d.Scope != pool.ScopeLocal {
		t.Fatalf("after the fleet's undrain: %+v %v, want the local drain", d, ok)
	}
	// Both cut at their deadlines: the fleet's (undrained) cut nothing.
	clk.Advance(time.Minute)
	if cuts.Load() != 1 {
		t.Fatalf("an undrained fleet drain cut at its deadline (%d cuts)", cuts.Load())
	}
	// A fleet drain made here replaces the local one, at the version
	// already applied (one kept while the store is apart).
	p.ApplyFleet(b, pool.Fleet{Drain: &pool.FleetDrain{Version: 8, Drained: true, Left: time.Second}, Here: true})
	if d, ok := b.DrainState(); !ok || d.Scope != pool.ScopeFleet {
		t.Fatalf("after a fleet drain made here: %+v %v", d, ok)
	}
	if rt := p.RuntimeStates(); len(rt) != 0 {
		t.Fatalf("the state file would keep %+v: the fleet's drain is its store's", rt)
	}
	// Enable ends every drain here.
	if err := p.Enable(ctx, b); err != nil || b.Draining() {
		t.Fatalf("enable: %v, draining %v", err, b.Draining())
	}
}

// The weight in use: this instance's own, else the fleet's while the file
// still gives the weight it replaced, else the file's.
func TestApplyFleetWeight(t *testing.T) {
	testnet.CheckLeaks(t)
	addrs := []string{testnet.FreeAddr(t), testnet.FreeAddr(t)}
	p := runPool(t, parse(t, poolTOML(t, addrs, "[pool.p.health]\nenabled = false")))
	ctx := context.Background()
	b := p.At(0)
	check := func(what string, w int, scope pool.Scope) {
		t.Helper()
		if b.Weight() != w || b.WeightScope() != scope {
			t.Fatalf("%s: weight %d scope %q, want %d %q", what, b.Weight(), b.WeightScope(), w, scope)
		}
	}
	check("at start", 1, "")
	p.ApplyFleet(b, fleetWeight(3, intp(4), 1))
	check("the fleet's", 4, pool.ScopeFleet)
	p.SetWeight(ctx, b, 2)
	check("this instance's own over the fleet's", 2, pool.ScopeLocal)
	p.ApplyFleet(b, fleetWeight(4, intp(5), 1))
	check("a newer fleet weight under the local one", 2, pool.ScopeLocal)
	p.SetWeight(ctx, b, 1) // the file's: ends the local one
	check("the local one ended", 5, pool.ScopeFleet)
	p.ApplyFleet(b, fleetWeight(2, intp(9), 1))
	check("an older record", 5, pool.ScopeFleet)
	p.ApplyFleet(b, fleetWeight(6, intp(3), 7))
	check("a fleet weight replacing another file weight", 1, "")
	p.SetWeight(ctx, b, 2)
	p.ApplyFleet(b, pool.Fleet{Weight: &pool.FleetWeight{Version: 7, Weight: intp(6), Configured: 1}, Here: true})
	check("a fleet weight set here replaces the local one", 6, pool.ScopeFleet)
	p.ApplyFleet(b, fleetWeight(8, nil, 0))
	check("the fleet's reset", 1, "")
}

// A reload carries the fleet's drain and weight with their versions (an
// older record read after it changes nothing), and a file whose weight
// changed since takes back its own.
func TestReloadCarriesFleetScopes(t *testing.T) {
	build := reloads(t, breaker.NewMemoryStore(nil))
	addrs := []string{"127.0.0.1:1001", "127.0.0.1:1002"}
	const extra = "[pool.p.health]\nenabled = false\n"
	old := build(poolTOML(t, addrs, extra), nil)
	ob := old.Backends()[0]
	old.ApplyFleet(ob, pool.Fleet{Drain: &pool.FleetDrain{Version: 3, Drained: true, Left: time.Hour},
		Weight: &pool.FleetWeight{Version: 5, Weight: intp(4), Configured: 1}})

	next := build(poolTOML(t, addrs, extra), old)
	nb := next.Backends()[0]
	if d, ok := nb.DrainState(); !ok || d.Scope != pool.ScopeFleet || nb.Weight() != 4 || nb.WeightScope() != pool.ScopeFleet {
		t.Fatalf("after the reload: drain %+v %v, weight %d %q; want the fleet's carried", d, ok, nb.Weight(), nb.WeightScope())
	}
	next.ApplyFleet(nb, fleetDrain(2, false, 0))
	if !nb.Draining() {
		t.Fatal("an older record ended the carried drain: the version was not carried")
	}

	// The file now gives b 2: the fleet's weight replaced 1, so the file's applies.
	text := strings.Replace(poolTOML(t, addrs, extra), `addr = "127.0.0.1:1001"`, "addr = \"127.0.0.1:1001\"\nweight = 2", 1)
	edited := build(text, next)
	if eb := edited.Backends()[0]; eb.Weight() != 2 || eb.WeightScope() != "" {
		t.Fatalf("after the file's edit: weight %d %q, want the file's 2", eb.Weight(), eb.WeightScope())
	}
}
