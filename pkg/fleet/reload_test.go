package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// A reload in Redis mode replaces each backend's breaker and stops the old
// one's Run, while dials made before it end afterwards: their results must
// reach the successor (breaker.HandOver), which makes the transitions in
// Redis by the same generation rule.

var reloadCfg = trips(2, time.Hour, time.Hour)

// reloadFrom builds the breaker replacing old's for the same key, as
// pool.New and Pool.HandOver do, runs it, and stops old's Run.
func (h *fleetHarness) reloadFrom(old *instance, stopOld func()) *instance {
	h.t.Helper()
	next := h.instance(old.name+"'", old.store, old.b.Key(), reloadCfg, nil)
	next.b.Inherit(old.b)
	old.b.HandOver(next.b)
	h.start(nil, next)
	stopOld()
	return next
}

func (h *fleetHarness) runningInstance(name, key string) (*instance, func()) {
	h.t.Helper()
	in := h.instance(name, h.store(nil, Options{}), key, reloadCfg, nil)
	ctx, cancel := context.WithCancel(h.ctx)
	wait := h.start(ctx, in)
	return in, func() {
		cancel()
		wait()
	}
}

func TestFailuresAfterAReloadTripInRedis(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.11.1:80"
	old, stopOld := h.runningInstance("A", key)
	f1, f2 := old.b.Begin(breaker.KindClient), old.b.Begin(breaker.KindClient)
	next := h.reloadFrom(old, stopOld)

	old.b.Done(f1, breaker.Failure)
	old.b.Done(f2, breaker.Failure)
	waitState(t, next, "two failures from before the reload trip it", isOpenAt(1))
	if raw := h.raw(key); !raw.Open || raw.OpenGen != 1 {
		t.Fatalf("redis holds %+v, want open at generation 1", raw)
	}
}

func TestResultsAfterAReloadKeepTheGenerationRuleInRedis(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.11.2:80"
	old, stopOld := h.runningInstance("A", key)
	preTrip := old.b.Begin(breaker.KindClient)
	st := tripOn(t, old)
	force := old.b.Begin(breaker.KindForce) // post-trip evidence
	next := h.reloadFrom(old, stopOld)

	old.b.Done(preTrip, breaker.Success)
	if raw := h.raw(key); !raw.Open || raw.OpenGen != st.Generation {
		t.Fatalf("after a pre-trip success redis holds %+v, want open at generation %d", raw, st.Generation)
	}
	if n := next.ev.n("stale"); n != 1 {
		t.Errorf("%d stale results counted, want 1", n)
	}
	old.b.Done(force, breaker.Success)
	waitState(t, next, "the force-try's success closes it", isClosedAt(st.Generation+1))
	if raw := h.raw(key); raw.Open || raw.Gen != st.Generation+1 {
		t.Fatalf("redis holds %+v, want closed at generation %d", raw, st.Generation+1)
	}
}
