package fleet

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// probeLog records every probe of a fleet: which instance made it, the
// generation Redis held when it ran, and how many ran at once.
type probeLog struct {
	h   *fleetHarness
	key string

	inflight    atomic.Int32
	maxInflight atomic.Int32

	mu    sync.Mutex
	gens  []uint64
	cools []int64 // the cooldown TTL Redis held as each probe ran (PTTL)
	by    []string
	calls int
}

// probe is instance name's Probe: it records the call, then runs during
// (nil: returns at once) and fails.
func (l *probeLog) probe(name string, during func(ctx context.Context)) func(context.Context) breaker.Result {
	return func(ctx context.Context) breaker.Result {
		n := l.inflight.Add(1)
		defer l.inflight.Add(-1)
		for {
			m := l.maxInflight.Load()
			if n <= m || l.maxInflight.CompareAndSwap(m, n) {
				break
			}
		}
		// The generation the Store holds now, read on the server (not
		// through a Store and its cache). A probe runs on its breaker's
		// goroutine, not the test's, so no t.Fatal here.
		ks := keyspace{prefix: testPrefix}
		var gen uint64
		if v, err := l.h.srv.Do("GET", ks.key(l.key, fieldGen)); err == nil {
			gen, _ = strconv.ParseUint(v, 10, 64)
		}
		// The cooldown's TTL left in milliseconds: -2 once it has run out.
		var cool int64
		if v, err := l.h.srv.Do("PTTL", ks.key(l.key, fieldCool)); err == nil {
			cool, _ = strconv.ParseInt(v, 10, 64)
		}
		l.mu.Lock()
		l.calls++
		l.gens = append(l.gens, gen)
		l.cools = append(l.cools, cool)
		l.by = append(l.by, name)
		l.mu.Unlock()
		if during != nil {
			during(ctx)
		}
		return breaker.Failure
	}
}

func (l *probeLog) snapshot() (calls int, gens []uint64, by []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls, append([]uint64(nil), l.gens...), append([]string(nil), l.by...)
}

func (l *probeLog) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// One probe per cooldown fleet-wide: three instances with a 300 ms
// cooldown that never grows and a backend that fails every probe. Each
// failed probe re-opens with a fresh cooldown, so until five probes have
// run: no two may run at one generation, none may overlap, and none may
// run while Redis still holds the cooldown of the generation it probes.
func TestOneProbePerCooldownFleetWide(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.0.5:80"
	const cooldown = 300 * time.Millisecond
	const probes = 5
	cfg := trips(1, cooldown, cooldown)
	log := &probeLog{h: h, key: key}
	var ins []*instance
	for _, name := range []string{"A", "B", "C"} {
		ins = append(ins, h.instance(name, h.store(nil, Options{}), key, cfg,
			func(o *breaker.Options) { o.Probe = log.probe(name, nil) }))
	}
	ctx, stop := context.WithCancel(h.ctx)
	defer stop()
	var waits []func()
	for _, in := range ins {
		waits = append(waits, h.start(ctx, in))
	}

	tripOn(t, ins[0])
	testnet.Eventually(t, "five probes", func() bool { return log.n() >= probes })
	stop()
	for _, w := range waits {
		w()
	}

	calls, gens, by := log.snapshot()
	t.Logf("%d probes (instances %v at generations %v), at most %d at once", calls, by, gens, log.maxInflight.Load())
	seen := map[uint64]int{}
	for i, g := range gens {
		if j, dup := seen[g]; dup {
			t.Errorf("probes %d (%s) and %d (%s) both ran at generation %d", j, by[j], i, by[i], g)
		}
		seen[g] = i
		if c := log.cools[i]; c != -2 {
			t.Errorf("probe %d (%s) ran at generation %d with %d ms of its cooldown left in redis", i, by[i], g, c)
		}
	}
	if m := log.maxInflight.Load(); m > 1 {
		t.Errorf("%d probes ran at once", m)
	}
	var reopens int
	for _, in := range ins {
		reopens += in.ev.n("reopen")
	}
	if reopens != calls {
		t.Errorf("%d failed probes re-opened %d times", calls, reopens)
	}
	if raw := h.raw(key); !raw.Open || raw.Gen != uint64(1+reopens) {
		t.Errorf("redis holds %+v after 1 trip and %d re-opens", raw, reopens)
	}
}

// ProbeNow on every instance at once, at one generation (fresh evidence
// seen fleet-wide, such as health checks passing everywhere), is one
// probe: the others find the lock taken and their requests are answered by
// it. The probe runs until the others have tried the lock, so "at once"
// does not depend on how the scheduler spreads the three wake-ups.
func TestProbeNowOnEveryInstanceAtOnceIsOneProbe(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.0.6:80"
	cfg := trips(1, time.Minute, defaultBreaker.MaxCooldown)
	log := &probeLog{h: h, key: key}
	names := []string{"A", "B", "C"}
	ops := map[string]*opCounter{}
	for _, name := range names {
		ops[name] = newOpCounter()
	}
	// othersTried is true once every instance but name asked Redis for the
	// probe lock.
	othersTried := func(name string) bool {
		for _, other := range names {
			if other != name && ops[other].n("acquire_probe") == 0 {
				return false
			}
		}
		return true
	}
	var ins []*instance
	for _, name := range names {
		s := h.store(nil, Options{Observe: ops[name].observe})
		ins = append(ins, h.instance(name, s, key, cfg, func(o *breaker.Options) {
			o.SnapshotRefresh = time.Hour
			o.Probe = log.probe(name, func(ctx context.Context) {
				deadline := time.Now().Add(10 * time.Second)
				for !othersTried(name) && time.Now().Before(deadline) && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
			})
		}))
	}
	for _, in := range ins {
		h.start(nil, in)
	}
	tripOn(t, ins[0])
	for _, in := range ins {
		waitState(t, in, "sees the trip", isOpenAt(1))
	}

	for _, in := range ins {
		in.b.ProbeNow()
	}
	// Done when each instance asked for the lock and the winner let it go.
	testnet.Eventually(t, "every request answered", func() bool {
		released := 0
		for _, name := range names {
			if ops[name].n("acquire_probe") == 0 {
				return false
			}
			released += ops[name].n("release_probe")
		}
		return released >= 1
	})
	// Once every instance has seen the re-open, the requests (made at
	// generation 1) are moot and the minute's cooldown runs: a second
	// probe could only have dialed before.
	for _, in := range ins {
		waitState(t, in, "sees the failed probe's re-open", isOpenAt(2))
	}
	calls, gens, by := log.snapshot()
	if calls != 1 {
		t.Fatalf("%d probes (instances %v at generations %v) for one ProbeNow per instance at generation 1, want 1", calls, by, gens)
	}
	if gens[0] != 1 {
		t.Fatalf("the probe ran at generation %d, want 1", gens[0])
	}
	for _, name := range names {
		if n := ops[name].n("acquire_probe"); n != 1 {
			t.Errorf("%s asked for the probe lock %d times, want 1", name, n)
		}
	}
}
