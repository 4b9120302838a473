package fleet

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// A trip on instance A stops B's client dials within one invalidation. B
// would otherwise learn nothing for an hour: its breaker refreshes its
// snapshot hourly and its Store serves cached reads and checks Redis
// hourly, so only the server's invalidation of the keys B read can tell it.
func TestTripOnOneInstanceReachesAnotherByInvalidation(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.0.1:80"
	slow := func(c *Config) { c.SyncInterval = time.Hour }
	a := h.instance("A", h.store(nil, Options{}), key, trips(1, time.Minute, defaultBreaker.MaxCooldown), nil)
	b := h.instance("B", h.store(slow, Options{}), key, trips(1, time.Minute, defaultBreaker.MaxCooldown),
		func(o *breaker.Options) { o.SnapshotRefresh = time.Hour })

	// When B's Store is told, to the microsecond (B.Allow is polled, 10 ms
	// apart).
	var told atomic.Int64
	defer b.store.Watch(key, func() { told.CompareAndSwap(0, time.Now().UnixNano()) })()

	// breaker.New read the key through B's Store (the server tracks it
	// for B from then on).
	h.start(nil, a)
	h.start(nil, b)
	if !b.b.Allow() {
		t.Fatal("B closed before anything happened")
	}
	before := b.store.Invalidations()

	failed := time.Now()
	a.b.Done(a.b.Begin(breaker.KindClient), breaker.Failure) // A's Run trips it
	var closedAt time.Time
	testnet.Eventually(t, "B stops client dials after A's trip", func() bool {
		if b.b.Allow() {
			return false
		}
		closedAt = time.Now()
		return true
	})
	waitState(t, a, "A's own trip", isOpenAt(1))
	ms := func(at time.Time) float64 { return float64(at.Sub(failed).Microseconds()) / 1000 }
	t.Logf("after A's failing dial: A's trip in Redis and its snapshot at %.1f ms, B's Store invalidated at %.1f ms, B.Allow false at %.1f ms (polled every 10 ms)",
		ms(time.Unix(0, a.ev.tripAt.Load())), ms(time.Unix(0, told.Load())), ms(closedAt))
	if st := b.b.State(); !st.Open || st.Generation != 1 {
		t.Fatalf("B's snapshot %+v, want open at generation 1", st)
	}
	if n := b.store.Invalidations(); n <= before {
		t.Fatalf("B's store counted %d invalidations (%d before A's trip): B learnt it some other way", n, before)
	}
}

// A manual disable made on A reaches B the same way: one invalidation.
func TestDisableOnOneInstanceReachesAnotherByInvalidation(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.0.2:80"
	slow := func(c *Config) { c.SyncInterval = time.Hour }
	a := h.instance("A", h.store(nil, Options{}), key, trips(defaultBreaker.Failures, defaultBreaker.Cooldown, defaultBreaker.MaxCooldown), nil)
	b := h.instance("B", h.store(slow, Options{}), key, trips(defaultBreaker.Failures, defaultBreaker.Cooldown, defaultBreaker.MaxCooldown),
		func(o *breaker.Options) { o.SnapshotRefresh = time.Hour })
	var told atomic.Int64
	defer b.store.Watch(key, func() { told.CompareAndSwap(0, time.Now().UnixNano()) })()
	h.start(nil, a)
	h.start(nil, b)
	if !b.b.Allow() {
		t.Fatal("B disabled before anything happened")
	}
	before := b.store.Invalidations()

	start := time.Now()
	if err := a.b.Disable(h.ctx); err != nil {
		t.Fatal(err)
	}
	if a.b.Allow() {
		t.Fatal("A allows dials right after its own disable")
	}
	var off time.Time
	testnet.Eventually(t, "B stops client dials after A's disable", func() bool {
		if b.b.Allow() {
			return false
		}
		off = time.Now()
		return true
	})
	t.Logf("after A's Disable began: B's Store invalidated at %.1f ms, B.Allow false at %.1f ms (polled every 10 ms)",
		float64(time.Unix(0, told.Load()).Sub(start).Microseconds())/1000, float64(off.Sub(start).Microseconds())/1000)
	if st := b.b.State(); !st.Disabled || st.Open {
		t.Fatalf("B's snapshot %+v, want disabled and closed", st)
	}
	if n := b.store.Invalidations(); n <= before {
		t.Fatalf("B's store counted %d invalidations (%d before A's disable)", n, before)
	}
}

// The instance that wrote last is told of the next change too. An
// instance's own write ends the server's tracking of the keys for it (the
// invalidation is sent to the writer as well), and for a while after it
// the instance reads those keys past its cache; those reads must still
// have the server track the keys again, or the writer would hear of
// nothing until its next timed refresh (here: an hour).
func TestWriterIsToldOfTheNextChangeByInvalidation(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.0.7:80"
	slow := func(c *Config) { c.SyncInterval = time.Hour }
	hourly := func(o *breaker.Options) { o.SnapshotRefresh = time.Hour }
	cfg := trips(1, time.Minute, defaultBreaker.MaxCooldown)
	a := h.instance("A", h.store(slow, Options{}), key, cfg, hourly)
	b := h.instance("B", h.store(slow, Options{}), key, cfg, hourly)
	h.start(nil, a)
	h.start(nil, b)

	tripOn(t, a) // A's own write
	waitState(t, b, "sees A's trip", isOpenAt(1))
	// B closes it with a force-try right away: within A's window of
	// reading past its cache.
	b.b.Done(b.b.Begin(breaker.KindForce), breaker.Success)
	waitState(t, b, "closed by its force-try", isClosedAt(2))
	waitState(t, a, "sees B's close", isClosedAt(2))
	// And the other way round, once more.
	b.b.Done(b.b.Begin(breaker.KindClient), breaker.Failure)
	waitState(t, a, "sees B's second trip", isOpenAt(3))
	a.b.Done(a.b.Begin(breaker.KindForce), breaker.Success)
	waitState(t, b, "sees A's close", isClosedAt(4))
}
