package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// The failover tests' fleet: three instances (A, B, C), each a Store of
// its own on a Redis that fails over (Sentinel or Cluster, real servers),
// each with a breaker for the backend the test trips ("broken") and one
// for a backend that never fails ("healthy"). Their guarantees, checked
// by every test whatever killed the master:
//
//   - no client hurt: the healthy backend stays usable on every instance
//     from the start to the end (its breaker never refuses a dial);
//   - no stale close: a dial begun before the trip that succeeds after
//     the failover closes nothing;
//   - convergence: every instance's snapshot ends open at the generation
//     the new master holds;
//   - one probe per cooldown: no two probes at one generation, none at
//     once.

// failoverTimeout is the Stores' timeout: l4lb's default, so that a dead
// master is noticed as in production.
const failoverTimeout = 250 * time.Millisecond

// haRedis is a Redis that fails over, as the failover tests drive it.
type haRedis interface {
	// config points a Store's Config at it.
	config(c *Config)
	// holder is the server answering key's keys now.
	holder(key string) *testnet.Redis
}

type failoverFleet struct {
	h       *fleetHarness
	ha      haRedis
	key     string
	ins     []*instance // A, B, C: the broken backend
	healthy []*instance // A, B, C: the healthy one
	probes  *failoverProbes
	hurt    func() error // stops the watch of the healthy backend
}

// newBareFleet is a harness with no redis-server of its own: its Stores
// are pointed elsewhere (a Sentinel set, a cluster).
func newBareFleet(t *testing.T) *fleetHarness {
	h := &fleetHarness{t: t}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	t.Cleanup(h.stop)
	return h
}

// failoverNames are the instances of a failover fleet.
var failoverNames = []string{"A", "B", "C"}

// newFailoverFleet starts the three instances on ha with cfg for key (the
// broken backend), every breaker probing through probes.
func newFailoverFleet(t *testing.T, ha haRedis, key string, cfg breaker.Config, during func(name string)) *failoverFleet {
	t.Helper()
	h := newBareFleet(t)
	f := &failoverFleet{h: h, ha: ha, key: key}
	f.probes = &failoverProbes{during: during}
	for _, name := range failoverNames {
		s := h.store(func(c *Config) {
			ha.config(c)
			c.Timeout, c.SyncInterval = failoverTimeout, 500*time.Millisecond
		}, Options{})
		in := h.instance(name, s, key, cfg, func(o *breaker.Options) { o.Probe = f.probes.probe(name) })
		f.probes.ins = append(f.probes.ins, in)
		ok := h.instance(name, s, key+"/healthy", cfg, nil)
		h.start(nil, in)
		h.start(nil, ok)
		f.ins = append(f.ins, in)
		f.healthy = append(f.healthy, ok)
	}
	f.hurt = f.watchHealthy()
	return f
}

// watchHealthy checks, every millisecond until stopped, that every
// instance lets clients dial the healthy backend.
func (f *failoverFleet) watchHealthy() (stop func() error) {
	ctx, cancel := context.WithCancel(f.h.ctx)
	var bad atomic.Value
	wait := f.h.goRun(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			for _, in := range f.healthy {
				if !in.b.Allow() {
					bad.CompareAndSwap(nil, fmt.Errorf("%s refused a client dial to the healthy backend: %s", in.name, fmtState(in.b.State())))
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	return func() error {
		cancel()
		wait()
		for _, in := range f.healthy {
			if n := in.ev.n("trip"); n != 0 {
				return fmt.Errorf("%s tripped the healthy backend %d times", in.name, n)
			}
		}
		if err, ok := bad.Load().(error); ok {
			return err
		}
		return nil
	}
}

// raw is what the server holding the key has; an error while none
// answers.
func (f *failoverFleet) raw() (rawState, error) { return rawOf(f.ha.holder(f.key), f.key) }

// converged waits until the server holding the key says open and every
// instance's snapshot is open at the server's generation, and returns what
// the server holds.
func (f *failoverFleet) converged(t *testing.T, what string) rawState {
	t.Helper()
	var raw rawState
	var err error
	testnet.Eventually(t, what+": every instance open at the new master's generation", func() bool {
		raw, err = f.raw()
		if err != nil || !raw.Open || raw.OpenGen != raw.Gen {
			return false
		}
		for _, in := range f.ins {
			if st := in.b.State(); !st.Open || st.Generation != raw.Gen {
				return false
			}
		}
		return true
	})
	for _, in := range f.ins {
		testnet.Eventually(t, in.name+"'s store back with the fleet", in.store.Up)
	}
	return raw
}

// convergedAbove is converged, failing the test unless the generation
// is above g: the trip written back above the one Redis lost.
func (f *failoverFleet) convergedAbove(t *testing.T, what string, g uint64) rawState {
	t.Helper()
	raw := f.converged(t, what)
	if raw.Gen <= g {
		t.Fatalf("%s: redis holds %+v, want open above generation %d", what, raw, g)
	}
	return raw
}

// tripSeen has B begin a client dial (the stale one), then A trip and
// every instance see it; it returns B's dial and the trip's generation.
func (f *failoverFleet) tripSeen(t *testing.T) (pre breaker.Attempt, g uint64) {
	t.Helper()
	pre = f.ins[1].b.Begin(breaker.KindClient)
	g = tripOn(t, f.ins[0]).Generation
	for _, in := range f.ins {
		waitState(t, in, "sees A's trip", isOpenAt(g))
	}
	return pre, g
}

// emptyReplica has replica catch up with master, then lose everything,
// as a replica restarted without its data before it was promoted.
func emptyReplica(t *testing.T, master, replica *testnet.Redis) {
	t.Helper()
	testnet.WaitCaughtUp(t, master, replica)
	for _, cmd := range [][]string{{"CONFIG", "SET", "replica-read-only", "no"}, {"FLUSHALL"}} {
		if _, err := replica.Do(cmd...); err != nil {
			t.Fatal(cmd, err)
		}
	}
}

// mergedSome fails the test unless some instance merged a key back.
func (f *failoverFleet) mergedSome(t *testing.T) {
	t.Helper()
	var n uint64
	for _, in := range f.ins {
		n += in.store.Reconciled()
	}
	if n < 1 {
		t.Fatal("no instance merged a key back")
	}
}

// check ends the test's watches and asserts the guarantees every failover
// test shares: the stale dial pre (begun on B before the trip) closes
// nothing, no client was hurt, at most one probe ran at one generation.
func (f *failoverFleet) check(t *testing.T, pre breaker.Attempt, raw rawState) {
	t.Helper()
	b := f.ins[1]
	stale := b.ev.n("stale")
	b.b.Done(pre, breaker.Success)
	if b.ev.n("stale") != stale+1 {
		t.Errorf("B's success of a dial begun before the trip (generation %d) was not counted stale: snapshot %s", pre.Generation, fmtState(b.b.State()))
	}
	// Nothing the success could have asked for may reach Redis: the
	// breaker stays open at the converged generation (or later ones, by
	// failed probes), never closed.
	time.Sleep(100 * time.Millisecond)
	after, err := f.raw()
	if err != nil {
		t.Fatal(err)
	}
	if !after.Open || after.Gen < raw.Gen {
		t.Errorf("redis holds %+v after a stale success, want open at %d or later", after, raw.Gen)
	}
	for _, in := range f.ins {
		if n := in.ev.n("close"); n != 0 {
			t.Errorf("%s closed the broken backend's breaker %d times", in.name, n)
		}
	}
	if err := f.hurt(); err != nil {
		t.Error(err)
	}
	if err := f.probes.check(); err != nil {
		t.Error(err)
	}
	f.probes.mu.Lock()
	t.Logf("probes by %v at generations %v", f.probes.by, f.probes.gens)
	f.probes.mu.Unlock()
}

// failoverProbes records every probe of the broken backend: by whom, at
// which generation (the prober's snapshot, which the probe's re-read under
// the lock set), how many ran at once. Every probe fails.
//
// The fleet-wide rule holds for probes made under the lock in Redis: an
// instance whose Store is apart (Redis out of reach for it, as during the
// failover) decides alone, under its own lock, so its probes are checked
// apart, by the same rule for that instance alone.
type failoverProbes struct {
	ins    []*instance
	during func(name string) // nil: a probe returns at once

	inflight, maxInflight atomic.Int32 // probes made while their Store was up
	mu                    sync.Mutex
	gens                  []uint64
	by                    []string // the prober, "A (apart)" when apart
}

func (p *failoverProbes) probe(name string) func(context.Context) breaker.Result {
	return func(ctx context.Context) breaker.Result {
		var in *instance
		for _, i := range p.ins {
			if i.name == name {
				in = i
			}
		}
		by := name
		if in.store.Up() {
			n := p.inflight.Add(1)
			defer p.inflight.Add(-1)
			for m := p.maxInflight.Load(); n > m && !p.maxInflight.CompareAndSwap(m, n); m = p.maxInflight.Load() {
			}
		} else {
			by += " (apart)"
		}
		p.mu.Lock()
		p.gens = append(p.gens, in.b.State().Generation)
		p.by = append(p.by, by)
		p.mu.Unlock()
		if p.during != nil {
			p.during(name)
		}
		return breaker.Failure
	}
}

func (p *failoverProbes) n() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.gens)
}

// fleetWide is how many probes were made under the lock in Redis.
func (p *failoverProbes) fleetWide() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, by := range p.by {
		if !strings.HasSuffix(by, " (apart)") {
			n++
		}
	}
	return n
}

// check reports two probes at one generation, or two at once, made under
// the lock in Redis; and two at one generation by one instance apart.
func (p *failoverProbes) check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	type slot struct {
		gen uint64
		by  string // "" for the fleet's lock
	}
	seen := map[slot]int{}
	for i, g := range p.gens {
		sl := slot{gen: g}
		if strings.HasSuffix(p.by[i], " (apart)") {
			sl.by = p.by[i]
		}
		if j, dup := seen[sl]; dup {
			errs = append(errs, fmt.Errorf("probes %d (%s) and %d (%s) both ran at generation %d (all: %v at %v)", j, p.by[j], i, p.by[i], g, p.by, p.gens))
		}
		seen[sl] = i
	}
	if m := p.maxInflight.Load(); m > 1 {
		errs = append(errs, fmt.Errorf("%d probes ran at once (all: %v at %v)", m, p.by, p.gens))
	}
	return errors.Join(errs...)
}

// failoverTrip has B begin a client dial (the stale one), then A fail one
// and kill run as soon as A's breaker has queued its trip: the master dies
// with the trip in flight (before the script ran, after it ran but before
// the replica had it, or after both: each run meets one). It returns B's
// dial.
func (f *failoverFleet) failoverTrip(t *testing.T, kill func()) breaker.Attempt {
	t.Helper()
	a, b := f.ins[0], f.ins[1]
	for _, in := range f.ins {
		waitState(t, in, "starts closed", isClosedAt(0))
	}
	pre := b.b.Begin(breaker.KindClient)
	a.b.Done(a.b.Begin(breaker.KindClient), breaker.Failure)
	kill()
	return pre
}
