package pool_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/pool"
)

// These tests drive the breaker through real dials on 127.0.0.1: clients
// connect to l4lb's listener, and its event loops dial the backends.

func TestRefusedBackendTripsAfterExactlyFailuresDials(t *testing.T) {
	live := startBackend(t)
	refused := testnet.FreeAddr(t)
	p := newLB(t, []string{refused, live.Addr},
		"algorithm = \"round-robin\"\nretries = 2\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 3\ncooldown = \"60s\"")
	for i := 0; i < 20; i++ {
		if got := connect(t, p); got != live.Addr {
			t.Fatalf("client %d got %q: a client must not see the refused backend's failures", i, got)
		}
	}
	if ok, failed := dials(p.Pool, refused, pool.DialClient); ok != 0 || failed != 3 {
		t.Fatalf("refused backend: %d ok / %d failed dials, want exactly 3 failed then no more", ok, failed)
	}
	b, _ := p.Backend(refused)
	if st := b.Breaker(); !st.Open || st.Generation != 1 || b.Trips() != 1 {
		t.Fatalf("breaker %+v trips %d, want open at generation 1 after one trip", st, b.Trips())
	}
	if b.ProbeFailures() != 0 {
		t.Fatal("a trip raised the probe-failure alert")
	}
	if s := p.stats(); s.OK != 20 || s.Failed != 0 || s.Rejected != 0 {
		t.Fatalf("listener counters %+v, want 20 ok", s)
	}
}

func TestFrozenBackendTripsOnConnectTimeouts(t *testing.T) {
	live := startBackend(t)
	frozen := testnet.FrozenBackend(t)
	p := newLB(t, []string{frozen, live.Addr},
		"algorithm = \"round-robin\"\nretries = 1\nconnect_timeout = \"200ms\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 3\ncooldown = \"60s\"")
	for i := 0; i < 8; i++ {
		if got := connect(t, p); got != live.Addr {
			t.Fatalf("client %d got %q, want the live backend", i, got)
		}
	}
	if _, failed := dials(p.Pool, frozen, pool.DialClient); failed != 3 {
		t.Fatalf("%d timed-out dials to the frozen backend, want 3", failed)
	}
	if b, _ := p.Backend(frozen); !b.Breaker().Open {
		t.Fatal("frozen backend's breaker did not trip on connect timeouts")
	}
}

func TestBackendRestartedDuringCooldownWaitsForTheProbe(t *testing.T) {
	back := newRestartable(t) // down at first: refused
	live := startBackend(t)
	// The cooldown runs on the pool's clock, which moves only below:
	// however slowly the clients are served, they are served during it.
	clk := clock.NewFake(time.Now())
	const cooldown, step = 30 * time.Second, 5 * time.Second
	p := newLBOn(t, clk, []string{back.addr, live.Addr},
		"algorithm = \"round-robin\"\nretries = 1\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"30s\"")
	connect(t, p)
	connect(t, p)
	b, _ := p.Backend(back.addr)
	if st := b.Breaker(); !st.Open || st.CooldownLeft != cooldown {
		t.Fatalf("breaker %+v, want tripped with the whole %v cooldown left", st, cooldown)
	}
	back.start() // back up, well within the cooldown

	for moved := time.Duration(0); moved < cooldown; moved += step {
		if got := connect(t, p); got != live.Addr {
			t.Fatalf("client reached %q %v into the cooldown", got, moved)
		}
		clk.Advance(min(step, cooldown-time.Millisecond-moved))
	}
	// The snapshot's age is stamped after its read, so a refresh that
	// straddled a step reads up to a step more left: not exactly 1ms.
	if st := b.Breaker(); !st.Open || st.CooldownLeft <= 0 {
		t.Fatalf("breaker %+v a millisecond before the cooldown ends, want open with time left", st)
	}
	if n := back.accepted(); n != 0 {
		t.Fatalf("restarted backend saw %d connections during the cooldown, want none", n)
	}
	clk.Advance(time.Millisecond)
	testnet.EventuallyOn(t, clk, 20*time.Millisecond, "the probe to close the breaker", func() bool { return !b.Breaker().Open })
	if ok, failed := dials(p.Pool, back.addr, pool.DialProbe); ok != 1 || failed != 0 {
		t.Fatalf("probe dials %d ok / %d failed, want exactly one successful probe", ok, failed)
	}
	// The probe's handshake completes in the kernel before the backend's
	// accept loop counts it: wait for the count, then check it is the one.
	testnet.Eventually(t, "the backend to accept the probe", func() bool { return back.accepted() >= 1 })
	if back.accepted() != 1 {
		t.Fatalf("backend saw %d connections before clients returned, want only the probe", back.accepted())
	}
	served := false
	for i := 0; i < 4 && !served; i++ {
		served = connect(t, p) == back.addr
	}
	if !served {
		t.Fatal("closed breaker, but clients never reach the backend")
	}
}

func TestFailedProbeReopensWithDoubledCooldownAndAlerts(t *testing.T) {
	dead := testnet.FreeAddr(t)
	live := startBackend(t)
	clk := clock.NewFake(time.Now())
	p := newLBOn(t, clk, []string{dead, live.Addr},
		"algorithm = \"round-robin\"\nretries = 1\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"300ms\"\nmax_cooldown = \"10s\"")
	connect(t, p)
	connect(t, p)
	b, _ := p.Backend(dead)
	testnet.EventuallyOn(t, clk, 20*time.Millisecond, "a failed probe", func() bool { return b.ProbeFailures() >= 1 })
	st := b.Breaker()
	if !st.Open || st.Generation < 2 {
		t.Fatalf("after a failed probe: %+v, want open with a new generation", st)
	}
	if st.Cooldown < 540*time.Millisecond || st.Cooldown > 660*time.Millisecond {
		t.Fatalf("cooldown after one failed probe %v, want 600ms ±10%%", st.Cooldown)
	}
}

func TestManualDisableSurvivesEverythingAutomatic(t *testing.T) {
	a := startBackend(t)
	other := startBackend(t)
	clk := clock.NewFake(time.Now())
	p := newLBOn(t, clk, []string{a.Addr, other.Addr},
		"algorithm = \"round-robin\"\n[pool.p.health]\ninterval = \"30ms\"\ntimeout = \"20ms\"\nrise = 1\nfall = 1\n[pool.p.breaker]\nfailures = 1\ncooldown = \"100ms\"")
	b, _ := p.Backend(a.Addr)
	if err := p.Disable(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	// Health checks keep passing, the breaker's loops run, clients come
	// and go, over 20 health intervals and 6 cooldowns: none of it may
	// bring the backend back.
	for range 20 {
		if got := connect(t, p); got != other.Addr {
			t.Fatalf("a client reached %q, the disabled backend", got)
		}
		clk.Advance(30 * time.Millisecond)
	}
	// The second check starts once the first is recorded (one in flight).
	testnet.EventuallyOn(t, clk, 30*time.Millisecond, "two health checks of the disabled backend", func() bool {
		hs, _ := dials(p.Pool, a.Addr, pool.DialHealth)
		return hs >= 2
	})
	if !b.Breaker().Disabled || b.Usable() {
		t.Fatal("disable was undone")
	}
	// Even all-down never force-tries a disabled backend.
	ob, _ := p.Backend(other.Addr)
	p.Disable(context.Background(), ob)
	if got := connect(t, p); got != "" {
		t.Fatalf("with every backend disabled a client reached %q", got)
	}
	if _, f := dials(p.Pool, a.Addr, pool.DialForce); f != 0 {
		t.Fatal("a disabled backend was force-tried")
	}
	p.Enable(context.Background(), b)
	if got := connect(t, p); got != a.Addr {
		t.Fatalf("after enable: %q", got)
	}
}

func TestAllDownForceTriesOnlyTheBackendClosestToRecovery(t *testing.T) {
	first := newRestartable(t)
	second, third := testnet.FreeAddr(t), testnet.FreeAddr(t)
	clk := clock.NewFake(time.Now())
	p := newLBOn(t, clk, []string{first.addr, second, third},
		"algorithm = \"round-robin\"\nretries = 0\nconnect_timeout = \"300ms\"\nconnect_budget = \"300ms\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")
	// A client whose force-try failed waits out its connect budget for
	// recovery, dialing nothing more (the counts below).
	// Trip them one after another: the first tripped has the least left.
	for _, addr := range []string{first.addr, second, third} {
		for {
			connect(t, p)
			if b, _ := p.Backend(addr); b.Breaker().Open {
				break
			}
		}
		clk.Advance(time.Second)
	}
	// The client whose dial tripped the last breaker force-tried too,
	// once the pool was all down: count from here.
	before := map[string]int64{}
	for _, b := range p.Backends() {
		_, before[b.Addr] = b.Dials(pool.DialClient)
	}
	_, forcedBefore := dials(p.Pool, first.addr, pool.DialForce)
	for i := 0; i < 5; i++ {
		if got := connect(t, p); got != "" {
			t.Fatalf("all down, yet a client got %q", got)
		}
	}
	if _, f := dials(p.Pool, first.addr, pool.DialForce); f-forcedBefore != 5 {
		t.Fatalf("%d force-tries of the backend closest to recovery, want 5 (one per client)", f-forcedBefore)
	}
	for _, addr := range []string{second, third} {
		if ok, f := dials(p.Pool, addr, pool.DialForce); ok+f != 0 {
			t.Fatalf("backend %s was force-tried too", addr)
		}
	}
	for _, b := range p.Backends() {
		if _, f := b.Dials(pool.DialClient); f != before[b.Addr] {
			t.Fatal("all-down clients made ordinary dials besides the force-try")
		}
	}
	fb, _ := p.Backend(first.addr)
	if st := fb.Breaker(); st.Generation != 1 || fb.ProbeFailures() != 0 {
		t.Fatalf("failed force-tries changed the breaker (%+v) or alerted", st)
	}
	// A successful force-try is recovery, before the cooldown ends.
	first.start()
	if got := connect(t, p); got != first.addr {
		t.Fatalf("force-try after restart got %q", got)
	}
	if st := fb.Breaker(); st.Open {
		t.Fatalf("successful force-try did not close the breaker: %+v", st)
	}
}

func TestHealthDownMakesUnusableButNeverFeedsTheBreaker(t *testing.T) {
	back := newRestartable(t)
	back.start()
	live := startBackend(t)
	clk := clock.NewFake(time.Now())
	p := newLBOn(t, clk, []string{back.addr, live.Addr},
		"algorithm = \"round-robin\"\n[pool.p.health]\ninterval = \"30ms\"\ntimeout = \"20ms\"\nrise = 2\nfall = 2")
	b, _ := p.Backend(back.addr)
	back.stop()
	testnet.EventuallyOn(t, clk, 30*time.Millisecond, "health to go down", func() bool { return !b.HealthUp() })
	for i := 0; i < 6; i++ {
		if got := connect(t, p); got != live.Addr {
			t.Fatalf("client reached %q while it is health-down", got)
		}
	}
	if _, f := dials(p.Pool, back.addr, pool.DialHealth); f < 2 {
		t.Fatalf("%d failed health dials counted, want at least fall=2", f)
	}
	if st := b.Breaker(); st.Open || st.Generation != 0 || b.Trips() != 0 {
		t.Fatalf("health failures reached the breaker: %+v", st)
	}
	back.start()
	testnet.EventuallyOn(t, clk, 30*time.Millisecond, "health to come back after rise=2", func() bool { return b.HealthUp() && b.Usable() })
}

// resettingBackend accepts, optionally sends a byte, and resets each
// connection after a moment (so the connect itself succeeds).
func resettingBackend(t *testing.T, sendFirst bool) string {
	t.Helper()
	testnet.CheckLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if sendFirst {
				c.Write([]byte("x"))
			}
			time.Sleep(50 * time.Millisecond)
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestEarlyResetCountsWhenConfigured(t *testing.T) {
	tests := []struct {
		name      string
		on        bool
		sendFirst bool // the backend sends a byte before resetting
		wantOpen  bool
	}{
		{"on: reset before the first byte is a failed dial", true, false, true},
		{"on: reset after a byte is no failure", true, true, false},
		{"off: a reset is never a failed dial", false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := resettingBackend(t, tc.sendFirst)
			extra := "algorithm = \"round-robin\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 2\n"
			if tc.on {
				extra += "count_early_reset = true\n"
			}
			p := newLB(t, []string{addr}, extra)
			b := p.Backends()[0]
			for i := 0; i < 2; i++ {
				c := p.dial(t)
				// The backend's reset is passed on to the client as a reset.
				if err := readToEnd(t, c); !isReset(err) {
					t.Fatalf("client %d: %v, want the backend's reset passed on", i, err)
				}
				c.Close()
				p.idle(t)
			}
			if s := p.stats(); s.OK != 2 {
				t.Fatalf("listener counters %+v, want both clients relayed", s)
			}
			ok, failed := b.Dials(pool.DialClient)
			if got := b.Breaker().Open; got != tc.wantOpen {
				t.Fatalf("breaker open = %v, want %v (dials %d ok / %d failed)", got, tc.wantOpen, ok, failed)
			}
			// The dial counters tell the same story as the breaker.
			wantFailed := int64(0)
			if tc.wantOpen {
				wantFailed = 2
			}
			if failed != wantFailed || ok != 2-wantFailed {
				t.Fatalf("dials %d ok / %d failed, want %d / %d", ok, failed, 2-wantFailed, wantFailed)
			}
			if !tc.on || !tc.wantOpen {
				return
			}
			// All down now: the force-try connects, then is reset before a
			// byte: a failed force-try, which changes nothing.
			c := p.dial(t)
			if err := readToEnd(t, c); !isReset(err) {
				t.Fatalf("force-tried client: %v, want the backend's reset passed on", err)
			}
			c.Close()
			p.idle(t)
			if _, f := b.Dials(pool.DialForce); f != 1 || !b.Breaker().Open || b.Breaker().Generation != 1 {
				t.Fatalf("force-try reset before a byte: %d failed force dials, breaker %+v; want 1, still open at generation 1", f, b.Breaker())
			}
		})
	}
}
