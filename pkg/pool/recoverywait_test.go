package pool_test

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
)

// A client whose dials fail while its pool goes all down waits, dialing
// nothing, within its connect budget for a backend to come back, and is
// served then (docs/breaker.md, rule 6): a reconnect storm is not fed by
// clients refused at once coming back at once.

// recoveryWaits is the listener's count of waits for recovery that ended
// as result.
func recoveryWaits(l *lb, result string) int64 {
	for _, lc := range l.server.Closes() {
		for i, r := range relay.QueueResults {
			if r == result {
				return lc.RecoveryWaits[i]
			}
		}
	}
	return -1
}

// readLine reads the first line a client gets ("" when l4lb closed it).
func readLine(t *testing.T, c interface {
	Read([]byte) (int, error)
	SetReadDeadline(time.Time) error
}) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if isTimeout(err) {
		t.Fatal("a waiting client was neither served nor refused in 30s")
	}
	return strings.TrimSuffix(line, "\n")
}

func TestAllDownClientsWaitForRecoveryAndAreServed(t *testing.T) {
	back := newRestartable(t)
	// A budget far longer than the test needs: the waits end by
	// recovery, never by the budget.
	p := newLB(t, []string{back.addr},
		"retries = 0\nconnect_budget = \"60s\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")
	b := p.Backends()[0]

	// A: its dial is refused and trips the breaker; the pool is all down.
	a := p.dial(t)
	defer a.Close()
	// A has its force-try once its dial tripped the breaker: refused too.
	testnet.Eventually(t, "A's force-try after its dial tripped the breaker", func() bool { _, f := b.Dials(pool.DialForce); return f == 1 })
	// B: all down at once; its force-try is refused.
	bc := p.dial(t)
	defer bc.Close()
	testnet.Eventually(t, "B's force-try", func() bool { _, f := b.Dials(pool.DialForce); return f == 2 })
	if n := p.server.Active(); n != 2 {
		t.Fatalf("%d clients open, want A and B held while the pool is down", n)
	}

	// The backend comes back; C's force-try closes the breaker, and the
	// waiting clients are dialed as any client.
	back.start()
	if got := connect(t, p); got != back.addr {
		t.Fatalf("C's force-try after the restart got %q", got)
	}
	for name, c := range map[string]interface {
		Read([]byte) (int, error)
		SetReadDeadline(time.Time) error
	}{"A": a, "B": bc} {
		if got := readLine(t, c); got != back.addr {
			t.Fatalf("client %s, held through the outage, got %q, want the backend", name, got)
		}
	}
	testnet.Eventually(t, "both waits counted served", func() bool { return recoveryWaits(p, "served") == 2 })
	// While they waited, nothing was dialed: A's one client dial, B's and
	// C's force-tries, then A's and B's dials once the breaker closed.
	if ok, f := b.Dials(pool.DialClient); ok != 2 || f != 1 {
		t.Fatalf("client dials: %d ok, %d failed; want A's refused one and A's and B's after recovery", ok, f)
	}
	if ok, f := b.Dials(pool.DialForce); ok != 1 || f != 2 {
		t.Fatalf("force-tries: %d ok, %d failed; want A's and B's refused and C's", ok, f)
	}
	if n := recoveryWaits(p, "timeout") + recoveryWaits(p, "left"); n != 0 {
		t.Fatalf("%d waits ended otherwise than served", n)
	}
}

func TestRecoveryWaitEndsWithTheBudget(t *testing.T) {
	down := testnet.FreeAddr(t) // nothing listens: every dial is refused
	p := newLB(t, []string{down},
		"retries = 0\nconnect_timeout = \"200ms\"\nconnect_budget = \"400ms\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")
	b := p.Backends()[0]
	for i := range 3 {
		start := time.Now()
		if got := connect(t, p); got != "" {
			t.Fatalf("client %d got %q from a pool that is down", i, got)
		}
		// Held for the budget, give or take a loaded machine: never
		// refused at once.
		if waited := time.Since(start); waited < 300*time.Millisecond {
			t.Fatalf("client %d refused after %v, before its 400ms budget ended", i, waited)
		}
	}
	if n := recoveryWaits(p, "timeout"); n != 3 {
		t.Fatalf("%d waits timed out, want 3", n)
	}
	// One dial each: the first client's refused dial (the trip), then one
	// force-try per client after it.
	_, cf := b.Dials(pool.DialClient)
	_, ff := b.Dials(pool.DialForce)
	if cf != 1 || ff != 3 {
		t.Fatalf("%d client and %d forced dials failed, want 1 and 3: one force-try per client, the first's included", cf, ff)
	}
	if n := p.stats().Failed; n != 3 {
		t.Fatalf("%d clients counted failed, want 3 (no_backend)", n)
	}
}

func TestClientLeavingARecoveryWaitIsCountedLeft(t *testing.T) {
	down := testnet.FreeAddr(t)
	p := newLB(t, []string{down},
		"retries = 0\nconnect_budget = \"60s\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")
	b := p.Backends()[0]
	c := p.dial(t)
	testnet.Eventually(t, "the refused dial to trip the breaker", func() bool { return b.Breaker().Open })
	c.SetLinger(0)
	c.Close()
	testnet.Eventually(t, "the wait to end as left", func() bool { return recoveryWaits(p, "left") == 1 })
	testnet.Eventually(t, "the client to be closed", func() bool { return p.server.Active() == 0 })
	if _, f := b.Dials(pool.DialClient); f != 1 {
		t.Fatalf("%d failed dials, want the one that tripped", f)
	}
}

func TestForceTriesOfABackendGoOneAtATime(t *testing.T) {
	for _, early := range []bool{false, true} {
		cfg := parse(t, poolTOML(t, []string{testnet.FreeAddr(t)}, fmt.Sprintf("[pool.p.breaker]\ncount_early_reset = %v", early)))
		p := runPoolOn(t, nil, cfg)
		b := p.Backends()[0]
		first, ok := p.TryBeginForce(b)
		if !ok {
			t.Fatal("the first force-try was refused")
		}
		if _, ok := p.TryBeginForce(b); ok {
			t.Fatal("a second force-try began while the first was in flight")
		}
		if n := b.Active(); n != 1 {
			t.Fatalf("a refused force-try counted: %d active", n)
		}
		p.EndDial(first, dialer.Failure)
		next, ok := p.TryBeginForce(b)
		if !ok {
			t.Fatal("no force-try after the first failed")
		}
		// Connected: the slot is free at once, even while a
		// count_early_reset verdict is still open.
		s := p.Pending(next)
		if _, ok := p.TryBeginForce(b); !ok {
			t.Fatalf("count_early_reset %v: the slot stayed taken after a connect", early)
		}
		s.Settle(dialer.Success)
	}
}

func TestAllDownRecoveryProbesTheOtherBackendsAtOnce(t *testing.T) {
	backs := []*restartable{newRestartable(t), newRestartable(t), newRestartable(t)}
	addrs := []string{backs[0].addr, backs[1].addr, backs[2].addr}
	p := newLB(t, addrs, "retries = 0\nconnect_timeout = \"300ms\"\nconnect_budget = \"300ms\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")
	for _, addr := range addrs {
		b, _ := p.Backend(addr)
		for !b.Breaker().Open {
			connect(t, p)
		}
	}
	for _, r := range backs {
		r.start()
	}
	// One client's force-try closes one breaker; the recovery probes the
	// other two now, not at the end of their 60s cooldowns.
	if got := connect(t, p); got == "" {
		t.Fatal("the force-try after the restart was refused")
	}
	testnet.Eventually(t, "every breaker closed", func() bool {
		for _, b := range p.Backends() {
			if b.Breaker().Open {
				return false
			}
		}
		return true
	})
	for _, b := range p.Backends() {
		if n := b.ProbeFailures(); n != 0 {
			t.Fatalf("backend %s: %d failed probes", b.Addr, n)
		}
	}
}

func TestRecoveryOfAPoolNotAllDownProbesNothing(t *testing.T) {
	down, alsoDown := newRestartable(t), newRestartable(t)
	live := startBackend(t)
	p := newLB(t, []string{down.addr, alsoDown.addr, live.Addr}, "retries = 0\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"")
	for _, addr := range []string{down.addr, alsoDown.addr} {
		b, _ := p.Backend(addr)
		for !b.Breaker().Open {
			connect(t, p)
		}
	}
	down.start()
	alsoDown.start()
	b, _ := p.Backend(down.addr)
	if err := p.Probe(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the requested probe to close", func() bool { return !b.Breaker().Open })
	other, _ := p.Backend(alsoDown.addr)
	// A probe would close it within milliseconds; give it ample time.
	time.Sleep(300 * time.Millisecond)
	if !other.Breaker().Open || alsoDown.accepted() != 0 {
		t.Fatalf("a recovery in a pool with a backend in rotation probed another backend (%+v, %d accepted)", other.Breaker(), alsoDown.accepted())
	}
}
