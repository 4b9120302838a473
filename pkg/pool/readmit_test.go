package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/pool"
)

// With the defaults (health every 2s, rise 2, cooldown 30s), a backend
// restarted after an outage serves clients once its post-trip checks pass
// and one probe confirms it, not after the cooldown (before: 49.6 s in the
// issue's trial, from a 30 s cooldown doubled by a probe that came too
// early).
func TestRestartedBackendIsReadmittedByPostTripHealthChecks(t *testing.T) {
	back := newRestartable(t)
	back.start()
	live := startBackend(t)
	// The health checks and the cooldown on a clock moved in steps of a
	// tenth of the check interval: took is measured on it, to a step.
	clk := clock.NewFake(time.Now())
	const step = 200 * time.Millisecond
	p := newLBOn(t, clk, []string{back.addr, live.Addr}, "")
	b, _ := p.Backend(back.addr)

	back.stop()
	testnet.Eventually(t, "client dials to trip the breaker", func() bool {
		connect(t, p)
		return b.Breaker().Open
	})
	testnet.EventuallyOn(t, clk, step, "health checks to see the backend down", func() bool { return !b.HealthUp() })
	before := b.Breaker()
	back.start()
	restarted := clk.Now()
	testnet.EventuallyOn(t, clk, step, "the restarted backend to be usable", b.Usable)
	took := clk.Now().Sub(restarted)
	after := b.Breaker()
	t.Logf("restarted backend usable after %v (cooldown left at restart: %v)", took.Round(time.Millisecond), before.CooldownLeft.Round(time.Millisecond))
	if took >= before.CooldownLeft {
		t.Fatalf("readmitted after %v: the cooldown (%v left) ran out first, so health checks did not speed it up", took, before.CooldownLeft)
	}
	if after.Open || after.Generation != before.Generation+1 || b.ProbeFailures() != 0 {
		t.Fatalf("breaker %+v (probe failures %d), want closed by one successful probe at generation %d",
			after, b.ProbeFailures(), before.Generation+1)
	}
	if ok, _ := b.Dials(pool.DialProbe); ok != 1 {
		t.Fatalf("%d successful probes, want the one that closed it", ok)
	}
	testnet.Eventually(t, "a client to reach the restarted backend", func() bool { return connect(t, p) == back.addr })
}

// An operator can ask for the probe now; it still decides.
func TestProbeRequestAndEnableProbeAtOnce(t *testing.T) {
	back := newRestartable(t)
	// The budget bounds how long a refused client waits for recovery.
	p := newLB(t, []string{back.addr}, "retries = 0\nconnect_timeout = \"300ms\"\nconnect_budget = \"300ms\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")
	b := p.Backends()[0]
	ctx := context.Background()
	if err := p.Probe(ctx, b); !errors.Is(err, pool.ErrBreakerClosed) {
		t.Fatalf("probe of a closed breaker: %v, want ErrBreakerClosed", err)
	}
	connect(t, p)
	if !b.Breaker().Open {
		t.Fatal("refused dial did not trip")
	}
	// Still down: the requested probe fails and re-opens (rule 4).
	if err := p.Probe(ctx, b); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the requested probe to fail and re-open", func() bool { return b.Breaker().Generation == 2 })
	if !b.Breaker().Open || b.ProbeFailures() != 1 {
		t.Fatalf("after a failed requested probe: %+v, probe failures %d", b.Breaker(), b.ProbeFailures())
	}
	back.start()
	if err := p.Probe(ctx, b); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the requested probe to close", func() bool { return !b.Breaker().Open })

	// Disabled: no probe on request; enable probes at once.
	back.stop()
	connect(t, p)
	if !b.Breaker().Open {
		t.Fatal("refused dial did not trip again")
	}
	if err := p.Disable(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := p.Probe(ctx, b); !errors.Is(err, pool.ErrDisabled) {
		t.Fatalf("probe of a disabled backend: %v, want ErrDisabled", err)
	}
	back.start()
	if err := p.Enable(ctx, b); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "enable to probe and close", func() bool { return b.Usable() })
}
