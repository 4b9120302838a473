package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// Outages and the merge after them. Instance A reaches Redis through a
// proxy the test cuts, so Redis keeps its data (and B, connected directly,
// keeps deciding on it) while A decides alone; healing the proxy lets A's
// Store.Run rejoin and merge.

const outageTimeout = 200 * time.Millisecond

// outageFleet is A (through the proxy, a short timeout, checked every
// 200 ms) and B (directly, told of changes only by invalidations) with a
// breaker each for key, both running.
type outageFleet struct {
	h    *fleetHarness
	p    *cutProxy
	a, b *instance
	key  string
}

func newOutageFleet(t *testing.T, key string) *outageFleet {
	t.Helper()
	h := newFleet(t)
	p := startProxy(t, h.srv.Addr)
	cfg := trips(1, time.Minute, defaultBreaker.MaxCooldown)
	sa := h.store(func(c *Config) {
		c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, 200*time.Millisecond
	}, Options{})
	sb := h.store(nil, Options{})
	f := &outageFleet{
		h: h, p: p, key: key,
		a: h.instance("A", sa, key, cfg, nil),
		b: h.instance("B", sb, key, cfg, func(o *breaker.Options) { o.SnapshotRefresh = time.Hour }),
	}
	h.start(nil, f.a)
	h.start(nil, f.b)
	return f
}

// cut cuts A off and waits until its Store decides locally.
func (f *outageFleet) cut(t *testing.T) {
	t.Helper()
	f.p.Cut()
	testnet.Eventually(t, "A's store notices the cut", func() bool { return !f.a.store.Up() })
}

// heal lets A through again and waits until its Store has rejoined.
func (f *outageFleet) heal(t *testing.T) {
	t.Helper()
	f.p.Heal()
	testnet.Eventually(t, "A's store rejoins", func() bool { return f.a.store.Up() })
}

// a) A trips alone while cut off; meanwhile B trips and closes in Redis.
// After the merge Redis is open (open wins, A's local trip written back)
// at a generation above both sides', and B is told.
func TestOutage_LocalTripIsWrittenBack(t *testing.T) {
	f := newOutageFleet(t, "web/10.0.1.1:80")
	f.cut(t)

	tripOn(t, f.b) // Redis gen 1
	f.b.b.Done(f.b.b.Begin(breaker.KindForce), breaker.Success)
	waitState(t, f.b, "closed by its force-try", isClosedAt(2))

	local := tripOn(t, f.a)
	if local.Generation != 1 || f.a.ev.n("trip") != 1 {
		t.Fatalf("A's local trip: snapshot %+v, trip events %d", local, f.a.ev.n("trip"))
	}
	if f.a.store.Up() {
		t.Fatal("A's store up while cut off")
	}
	if raw := f.h.raw(f.key); raw.Open || raw.Gen != 2 {
		t.Fatalf("redis holds %+v while A is cut off, want closed at generation 2 (B's)", raw)
	}
	if !f.b.b.Allow() {
		t.Fatal("B stopped dials on A's local trip while A was cut off")
	}

	f.heal(t)
	raw := f.h.raw(f.key)
	if !raw.Open || raw.Gen <= 2 || raw.Gen <= local.Generation || raw.OpenGen != raw.Gen {
		t.Fatalf("redis holds %+v after the merge: want open above generations 2 (redis) and %d (A)", raw, local.Generation)
	}
	if n := f.a.store.Reconciled(); n < 1 {
		t.Fatalf("A's store reconciled %d keys", n)
	}
	waitState(t, f.b, "told of the merged trip", isOpenAt(raw.Gen))
	waitState(t, f.a, "reads the merged state", isOpenAt(raw.Gen))
	t.Logf("merged: A local gen %d open, redis gen 2 closed -> redis gen %d open", local.Generation, raw.Gen)
}

// b) Both see the breaker open in Redis at g. A, cut off, closes it locally
// with a successful force-try. After the merge Redis is still open (a local
// close is re-checked, never written back) above g, and A is open again.
func TestOutage_LocalCloseIsNotWrittenBack(t *testing.T) {
	f := newOutageFleet(t, "web/10.0.1.2:80")
	g := tripOn(t, f.b).Generation
	waitState(t, f.a, "sees B's trip", isOpenAt(g))
	f.cut(t)

	f.a.b.Done(f.a.b.Begin(breaker.KindForce), breaker.Success)
	waitState(t, f.a, "closed locally by its force-try", isClosedAt(g+1))
	if f.a.ev.n("close") != 1 || f.a.store.Up() {
		t.Fatalf("A's local close: close events %d, store up %v", f.a.ev.n("close"), f.a.store.Up())
	}
	if raw := f.h.raw(f.key); !raw.Open || raw.Gen != g {
		t.Fatalf("redis holds %+v while A is cut off, want open at %d", raw, g)
	}

	f.heal(t)
	raw := f.h.raw(f.key)
	if !raw.Open || raw.Gen <= g+1 || raw.OpenGen != raw.Gen {
		t.Fatalf("redis holds %+v after the merge, want still open above generation %d", raw, g+1)
	}
	if n := f.a.store.Reconciled(); n < 1 {
		t.Fatalf("A's store reconciled %d keys", n)
	}
	waitState(t, f.a, "open again after the merge", isOpenAt(raw.Gen))
	waitState(t, f.b, "told of the merge", isOpenAt(raw.Gen))
	if f.b.ev.n("close") != 0 {
		t.Fatal("B closed")
	}
}

// c) Cut off, A refuses an enable (it must reach the whole fleet or no
// one) and keeps a disable locally, which the merge spreads.
func TestOutage_EnableRefusedDisableKept(t *testing.T) {
	f := newOutageFleet(t, "web/10.0.1.3:80")
	f.cut(t)

	err := f.a.b.Enable(context.Background())
	if !errors.Is(err, ErrStoreDown) {
		t.Fatalf("enable while cut off: %v, want an error wrapping ErrStoreDown", err)
	}
	if err := f.a.b.Disable(context.Background()); err != nil {
		t.Fatalf("disable while cut off: %v", err)
	}
	if st := f.a.b.State(); !st.Disabled || f.a.b.Allow() {
		t.Fatalf("A's snapshot after its local disable: %+v", st)
	}
	if raw := f.h.raw(f.key); raw.Disabled {
		t.Fatal("disable reached redis through a cut proxy")
	}
	if !f.b.b.Allow() {
		t.Fatal("B disabled while A is cut off")
	}

	f.heal(t)
	if raw := f.h.raw(f.key); !raw.Disabled {
		t.Fatalf("redis holds %+v after the merge, want disabled", raw)
	}
	waitState(t, f.b, "told of the disable", func(st breaker.State) bool { return st.Disabled })
	if st := f.a.b.State(); !st.Disabled {
		t.Fatalf("A's disable lost in the merge: %+v", st)
	}
}

// monotonic watches an instance's snapshot until stopped: it must never
// close, nor go back a generation.
func monotonic(h *fleetHarness, in *instance) (stop func() error) {
	ctx, cancel := context.WithCancel(h.ctx)
	var bad atomic.Value
	wait := h.goRun(ctx, func(ctx context.Context) {
		last := in.b.State()
		for ctx.Err() == nil {
			st := in.b.State()
			if !st.Open || st.Generation < last.Generation {
				bad.CompareAndSwap(nil, errors.New(in.name+"'s snapshot went from "+
					fmtState(last)+" to "+fmtState(st)))
			}
			last = st
			time.Sleep(time.Millisecond)
		}
	})
	return func() error {
		cancel()
		wait()
		if err, ok := bad.Load().(error); ok {
			return err
		}
		return nil
	}
}

func fmtState(st breaker.State) string {
	s := "closed"
	if st.Open {
		s = "open"
	}
	return s + " at generation " + itoa(st.Generation)
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// d) Redis loses its data (FLUSHALL) while A's breaker is open: each
// Store's check (every SyncInterval) finds the fleet's marker gone and
// writes its local copy back, so Redis holds the open breaker again, and no
// snapshot ever closes or goes back a generation meanwhile.
func TestOutage_DataLossIsResynced(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.1.4:80"
	fast := func(c *Config) { c.SyncInterval, c.Timeout = 200*time.Millisecond, outageTimeout }
	cfg := trips(1, time.Minute, defaultBreaker.MaxCooldown)
	a := h.instance("A", h.store(fast, Options{}), key, cfg, nil)
	b := h.instance("B", h.store(fast, Options{}), key, cfg, nil)
	h.start(nil, a)
	h.start(nil, b)
	g := tripOn(t, a).Generation
	waitState(t, b, "sees A's trip", isOpenAt(g))
	// And a backend only B has (say, added to B's configuration first):
	// only B's copy can bring it back, whoever notices the loss first.
	const onlyB = "web/10.0.1.6:80"
	b2 := h.instance("B", b.store, onlyB, cfg, nil)
	h.start(nil, b2)
	g2 := tripOn(t, b2).Generation
	stopA, stopB, stopB2 := monotonic(h, a), monotonic(h, b), monotonic(h, b2)

	if _, err := h.srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	flushed := time.Now()
	var raw rawState
	testnet.Eventually(t, "redis holds the open breaker again", func() bool {
		raw = h.raw(key)
		return raw.Open
	})
	t.Logf("resynced %d ms after the flush: %+v", time.Since(flushed).Milliseconds(), raw)
	if raw.Gen <= g || raw.OpenGen != raw.Gen {
		t.Fatalf("redis holds %+v after the resync, want open above generation %d", raw, g)
	}
	if v, err := h.srv.Do("EXISTS", testPrefix+"fleet"); err != nil || v != "1" {
		t.Fatalf("fleet marker after the resync: %q %v", v, err)
	}
	if n := a.store.Reconciled() + b.store.Reconciled(); n < 1 {
		t.Fatalf("reconciled %d keys", n)
	}
	waitState(t, a, "reads the resynced state", isOpenAt(raw.Gen))
	waitState(t, b, "reads the resynced state", isOpenAt(raw.Gen))
	raw2 := h.waitWrittenBack("redis holds B's own open breaker again", onlyB, g2)
	waitState(t, b2, "reads its resynced state", isOpenAt(raw2.Gen))
	for _, stop := range []func() error{stopA, stopB, stopB2} {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}
}

// f) Redis loses its data while A is cut off, and B (connected) notices
// first and marks it again. A, rejoining, finds the marker set: it must
// still know the data was lost and write its own keys back, or its
// breaker, open at a generation Redis no longer has, would never probe
// (Redis says closed) nor take Redis's state (a lower generation): open
// for good. Here the backend recovered, so A's probe closes it.
func TestOutage_DataLostWhileApartIsWrittenBackOnRejoin(t *testing.T) {
	h := newFleet(t)
	p := startProxy(t, h.srv.Addr)
	const key = "web/10.0.1.7:80"
	fast := func(c *Config) { c.SyncInterval, c.Timeout = 200*time.Millisecond, outageTimeout }
	sa := h.store(func(c *Config) { fast(c); c.RedisURL = p.URL() }, Options{})
	sb := h.store(fast, Options{}) // B has no breaker for key
	var probes atomic.Int32
	a := h.instance("A", sa, key, trips(1, 300*time.Millisecond, defaultBreaker.MaxCooldown), func(o *breaker.Options) {
		o.Probe = func(context.Context) breaker.Result { probes.Add(1); return breaker.Success }
	})
	h.start(nil, a)
	g := tripOn(t, a).Generation
	f := &outageFleet{h: h, p: p, a: a, key: key}
	f.cut(t)

	if _, err := h.srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "B marks the fleet's data again", func() bool {
		v, _ := h.srv.Do("EXISTS", testPrefix+"fleet")
		return v == "1"
	})
	if n := sb.Reconciled(); n != 0 {
		t.Fatalf("B merged %d keys: it knows none", n)
	}

	f.heal(t)
	if n := sa.Reconciled(); n < 1 {
		t.Fatalf("A merged %d keys after rejoining a Redis that lost them", n)
	}
	raw := h.raw(key)
	if raw.Gen <= g {
		t.Fatalf("redis holds %+v after A rejoined, want above generation %d (A's)", raw, g)
	}
	waitState(t, a, "probes and closes", func(st breaker.State) bool { return !st.Open && st.Generation > g })
	if raw := h.raw(key); raw.Open || raw.Gen <= g {
		t.Fatalf("redis holds %+v after A's successful probe", raw)
	}
	t.Logf("A: open at %d before the loss, redis at %d after its rejoin, closed at %d by its probe (%d probes)",
		g, raw.Gen, a.b.State().Generation, probes.Load())
}

// e) Redis killed under load: no Store call waits much longer than the
// timeout (bounded, not fast: the bound is what the breakers' goroutines
// rely on), the Store turns local, and comes back when Redis does.
//
// The bound is 5 timeouts plus what the machine itself costs: a control
// goroutine measures how late a 1 ms sleep wakes meanwhile, so a loaded
// machine's scheduling delay is not blamed on the Store, while a call
// that really waited on the dead server (a kernel connect or read timeout,
// seconds to minutes) still fails the test.
func TestOutage_KilledRedisBoundsEveryCall(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.1.5:80"
	s := h.store(func(c *Config) { c.SyncInterval, c.Timeout = 200*time.Millisecond, outageTimeout }, Options{})

	var (
		mu      sync.Mutex
		calls   int
		longest time.Duration
		longOp  string
		late    time.Duration // the control's worst wake-up delay
	)
	timed := func(op string, f func()) {
		start := time.Now()
		f()
		d := time.Since(start)
		mu.Lock()
		calls++
		if d > longest {
			longest, longOp = d, op
		}
		mu.Unlock()
	}
	ctx, stop := context.WithCancel(h.ctx)
	defer stop()
	waitLoad := h.goRun(ctx, func(ctx context.Context) {
		for i := 0; i < 1_000_000 && ctx.Err() == nil; i++ {
			var st breaker.State
			timed("read", func() { st, _ = s.Read(ctx, key) })
			if st.Open {
				timed("close", func() { s.Close(ctx, key, st.Generation) })
			} else {
				timed("trip", func() { s.Trip(ctx, key, st.Generation, time.Minute, time.Minute) })
			}
		}
	})
	waitControl := h.goRun(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			start := time.Now()
			time.Sleep(time.Millisecond)
			if d := time.Since(start) - time.Millisecond; d > 0 {
				mu.Lock()
				late = max(late, d)
				mu.Unlock()
			}
		}
	})

	// moreCalls waits until the load has made n more calls: each phase
	// is measured under load, however slowly the machine runs it.
	moreCalls := func(what string, n int) {
		t.Helper()
		mu.Lock()
		from := calls
		mu.Unlock()
		testnet.Eventually(t, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return calls >= from+n
		})
	}
	moreCalls("calls answered by redis", 100)
	h.srv.Kill()
	killed := time.Now()
	testnet.Eventually(t, "store turns local", func() bool { return !s.Up() })
	t.Logf("store local %d ms after the kill", time.Since(killed).Milliseconds())
	// Load on the local copy, while Run's rejoin tries fail.
	moreCalls("calls on the local copy", 100)
	h.srv.Restart()
	restarted := time.Now()
	testnet.Eventually(t, "store rejoins", func() bool { return s.Up() })
	t.Logf("store up %d ms after the restart", time.Since(restarted).Milliseconds())
	moreCalls("calls after the rejoin", 100)
	stop()
	waitLoad()
	waitControl()

	mu.Lock()
	defer mu.Unlock()
	bound := 5*outageTimeout + late
	t.Logf("%d calls, the longest a %s of %v (timeout %v; a 1 ms sleep woke up to %v late; bound %v)",
		calls, longOp, longest, outageTimeout, late, bound)
	if longest >= bound {
		t.Fatalf("a %s took %v: a Store call must not wait much past its timeout (%v; bound %v)", longOp, longest, outageTimeout, bound)
	}
}
