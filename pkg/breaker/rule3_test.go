package breaker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Rule 3: the breaker probes by itself once the cooldown has run out.
func TestRule3_ProbeAfterCooldownCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: 30 * time.Second}, nil)
		stop := run(f.b)
		defer stop()
		trip(t, f.b)
		time.Sleep(30*time.Second - time.Millisecond)
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probed %d times before the cooldown ran out", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probes at cooldown end = %d, want 1", n)
		}
		st := f.storeState()
		if st.Open || st.Generation != 2 || !f.b.Allow() {
			t.Fatalf("successful probe did not close: %+v", st)
		}
		if f.ev.n("close") != 1 {
			t.Fatalf("close events = %d", f.ev.n("close"))
		}
		time.Sleep(time.Minute) // a closed breaker does not probe
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("closed breaker probed: %d", n)
		}
	})
}

// 100 concurrent client attempts (and a second Run loop) while the probe is
// in flight make no second probe.
func TestRule3_OneProbeInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		counting := &lockCountingStore{MemoryStore: f.store}
		f.b.store = counting
		f.probe.hold = make(chan struct{})
		stop1, stop2 := run(f.b), run(f.b)
		trip(t, f.b)
		time.Sleep(f.b.Config().Cooldown)
		synctest.Wait() // the probe is dialing, held

		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if f.b.Allow() {
					t.Error("client allowed while open")
				}
				dial(f.b, KindClient, Failure)
			})
		}
		wg.Wait()
		time.Sleep(5 * time.Second) // many refresh ticks of both loops
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probe dials while one is in flight = %d, want 1", n)
		}
		// The instance does not even ask the Store for the lock again while
		// its own probe is in flight.
		if n := counting.acquires.Load(); n != 1 {
			t.Fatalf("probe lock requests while in flight = %d, want 1", n)
		}
		close(f.probe.hold)
		synctest.Wait()
		if f.storeState().Open {
			t.Fatal("released probe success did not close")
		}
		stop1()
		stop2()
	})
}

// Two instances on one Store: one probe fleet-wide under the probe lock.
func TestRule3_FleetOneProbeUnderLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		f.probe.hold = make(chan struct{})
		other := f.add(Config{}, nil) // shares f.probe, so calls count both
		stopA, stopB := run(f.b), run(other)
		trip(t, f.b)
		if err := other.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(f.b.Config().Cooldown + 5*time.Second)
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("fleet probe dials = %d, want 1", n)
		}
		close(f.probe.hold)
		synctest.Wait()
		time.Sleep(time.Second) // B's next refresh sees the close
		synctest.Wait()
		if !f.b.Allow() || !other.Allow() {
			t.Fatal("both instances should see the close")
		}
		stopA()
		stopB()
	})
}

// A prober that crashed holding the lock wedges nothing: the lock expires.
func TestRule3_CrashedProbeLockExpiresByTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, func(o *Options) { o.ProbeLockTTL = 10 * time.Second })
		trip(t, f.b)
		stop := run(f.b)
		defer stop()
		time.Sleep(f.b.Config().Cooldown - time.Second)
		// Another instance takes the lock and crashes without releasing it.
		if ok, _ := f.store.AcquireProbe(context.Background(), testKey, "crashed", 10*time.Second); !ok {
			t.Fatal("could not plant the crashed owner's lock")
		}
		time.Sleep(10*time.Second - time.Millisecond) // cooldown over, lock still live
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probed through another owner's live lock: %d", n)
		}
		time.Sleep(time.Second) // TTL expired, next refresh tick probes
		synctest.Wait()
		if n := f.probe.calls.Load(); n != 1 {
			t.Fatalf("probes after the lock's TTL = %d, want 1", n)
		}
		if f.storeState().Open {
			t.Fatal("probe success did not close")
		}
	})
}

// successes=2 needs two post-trip successes; a stale one between them does
// not count.
func TestRule3_SuccessesNeedsPostTripSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Successes: 2}, nil)
		before := f.b.Begin(KindClient)
		trip(t, f.b)
		dial(f.b, KindProbe, Success)
		if !f.storeState().Open {
			t.Fatal("closed after 1 of 2 successes")
		}
		f.b.Done(before, Success) // stale
		if !f.storeState().Open {
			t.Fatal("stale success counted towards closing")
		}
		dial(f.b, KindForce, Success)
		if st := f.storeState(); st.Open || st.Generation != 2 {
			t.Fatalf("2 post-trip successes did not close: %+v", st)
		}
		if f.ev.n("stale") != 1 || f.ev.n("close") != 1 {
			t.Fatalf("stale=%d close=%d", f.ev.n("stale"), f.ev.n("close"))
		}
	})
}

// Successes towards closing belong to one generation: a re-open restarts
// the count.
func TestRule3_SuccessCountResetsOnReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Successes: 2}, nil)
		trip(t, f.b)
		dial(f.b, KindProbe, Success) // 1 of 2 at gen 1
		dial(f.b, KindProbe, Failure) // re-open: gen 2
		dial(f.b, KindProbe, Success) // 1 of 2 at gen 2
		if st := f.storeState(); !st.Open || st.Generation != 2 {
			t.Fatalf("closed on successes of two generations: %+v", st)
		}
	})
}

// The close is a compare-and-delete against the Store: if another instance
// re-opened between the success and the close, no close.
func TestRule3_CloseIsCompareAndDeleteAgainstStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, nil)
		trip(t, f.b)
		a := f.b.Begin(KindProbe) // gen 1
		// Another instance's probe fails meanwhile: the Store moves to gen 2.
		if _, ok, err := f.store.Reopen(context.Background(), testKey, 1, time.Minute, time.Minute); !ok || err != nil {
			t.Fatalf("reopen: %v %v", ok, err)
		}
		f.b.Done(a, Success) // our snapshot still says gen 1 open
		st := f.storeState()
		if !st.Open || st.Generation != 2 {
			t.Fatalf("closed over another instance's re-open: %+v", st)
		}
		if f.ev.n("close") != 0 || f.ev.n("stale") != 1 {
			t.Fatalf("close=%d stale=%d", f.ev.n("close"), f.ev.n("stale"))
		}
	})
}

// A probe that finds the backend already closed (by another instance) does
// not dial.
func TestRule3_ProbeRechecksStoreUnderLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{}, func(o *Options) { o.SnapshotRefresh = time.Hour })
		trip(t, f.b)
		if _, ok, _ := f.store.Close(context.Background(), testKey, 1); !ok {
			t.Fatal("close")
		}
		f.b.probe(context.Background(), false, 0) // snapshot says open; the Store does not
		if n := f.probe.calls.Load(); n != 0 {
			t.Fatalf("probe dialed a closed backend %d times", n)
		}
		if !f.b.Allow() {
			t.Fatal("probe's read did not refresh the snapshot")
		}
	})
}

// lockCountingStore counts probe-lock requests.
type lockCountingStore struct {
	*MemoryStore
	acquires atomic.Int64
}

func (s *lockCountingStore) AcquireProbe(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	s.acquires.Add(1)
	return s.MemoryStore.AcquireProbe(ctx, key, owner, ttl)
}

// slowLockStore answers the probe lock and the reads late, as a Store
// whose server is far, or waits for its replica after the lock.
type slowLockStore struct {
	*MemoryStore
	lock, read time.Duration
	asked      atomic.Int64 // when the last AcquireProbe was asked, in ns of the fake clock
}

func (s *slowLockStore) AcquireProbe(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	s.asked.Store(time.Now().UnixNano())
	time.Sleep(s.lock)
	return s.MemoryStore.AcquireProbe(ctx, key, owner, ttl)
}

func (s *slowLockStore) Read(ctx context.Context, key string) (State, error) {
	time.Sleep(s.read)
	return s.MemoryStore.Read(ctx, key)
}

// A probe ends by the time its lock runs out, counted from when the lock
// was asked for: the way to the lock and the read under it come out of
// its time. Given the lock's whole TTL after them, the probe outlived the
// lock, and another instance could probe the same generation beside it.
func TestRule3_ProbeEndsWithItsLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		slow := &slowLockStore{MemoryStore: NewMemoryStore(nil), lock: 2 * time.Second, read: time.Second}
		f := &fixture{t: t, store: slow.MemoryStore, ev: newRecorder(), logs: &logCapture{}, probe: &fakeProbe{}}
		var deadline atomic.Int64
		b, err := New(testKey, Config{}.withDefaults(), slow, Options{Logger: slog.New(f.logs), Events: f.ev.events(),
			Rand: func() float64 { return 0.5 }, ProbeLockTTL: ttl, StoreTimeout: 5 * time.Second,
			Probe: func(ctx context.Context) Result {
				d, _ := ctx.Deadline()
				deadline.Store(d.UnixNano())
				return Success
			}})
		if err != nil {
			t.Fatal(err)
		}
		f.b = b
		trip(t, b)
		stop := run(b)
		defer stop()
		time.Sleep(b.Config().Cooldown + 30*time.Second)
		synctest.Wait()
		if deadline.Load() == 0 {
			t.Fatal("no probe ran")
		}
		if over := time.Duration(deadline.Load() - slow.asked.Load()); over > ttl {
			t.Fatalf("the probe's deadline is %v after its lock was asked for; the lock lasts %v", over, ttl)
		}
	})
}

// A lock that ran out on the way to the probe (a slow lock and a slow
// read under it) makes no probe: one that failed for want of time would
// judge the backend on nothing.
func TestRule3_NoProbeOnALockSpentOnTheWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		slow := &slowLockStore{MemoryStore: NewMemoryStore(nil), lock: 6 * time.Second, read: 5 * time.Second}
		var probes atomic.Int32
		b, err := New(testKey, Config{}.withDefaults(), slow, Options{Logger: slog.New(slog.DiscardHandler),
			Rand: func() float64 { return 0.5 }, ProbeLockTTL: ttl, StoreTimeout: 10 * time.Second,
			Probe: func(context.Context) Result { probes.Add(1); return Failure }})
		if err != nil {
			t.Fatal(err)
		}
		trip(t, b)
		g := b.State().Generation
		stop := run(b)
		time.Sleep(b.Config().Cooldown + 30*time.Second)
		synctest.Wait()
		stop()
		if n := probes.Load(); n != 0 {
			t.Fatalf("%d probes ran on locks spent on the way", n)
		}
		if st := b.State(); !st.Open || st.Generation != g {
			t.Fatalf("state %+v, want still open at generation %d (nothing judged)", st, g)
		}
	})
}
