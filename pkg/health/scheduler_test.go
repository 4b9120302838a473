package health

import (
	"context"
	mathrand "math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
)

// lockedRand is a seeded Rand safe for many probers' goroutines.
func lockedRand(seed uint64) func() float64 {
	var mu sync.Mutex
	r := mathrand.New(mathrand.NewPCG(seed, seed))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// slices counts check starts per 100 ms slice from t0.
type sliceCounts struct {
	mu     sync.Mutex
	t0     time.Time
	counts []int
}

const sliceWidth = 100 * time.Millisecond

func newSlices(span time.Duration) *sliceCounts {
	return &sliceCounts{t0: time.Now(), counts: make([]int, span/sliceWidth)}
}

func (s *sliceCounts) check(context.Context) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := int(time.Since(s.t0) / sliceWidth); k < len(s.counts) {
		s.counts[k]++
	}
	return Outcome{Result: Pass}
}

// maxOverMean is the fullest slice of counts[from:to] over their mean.
func (s *sliceCounts) maxOverMean(from, to time.Duration) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts[from/sliceWidth : to/sliceWidth]
	sum, hi := 0, 0
	for _, v := range c {
		sum += v
		hi = max(hi, v)
	}
	return float64(hi) * float64(len(c)) / float64(sum)
}

// The bar: 1,000 probers checked every 2 s, no 100 ms slice of
// any interval gets more than twice the mean. Both drivers meet it (Run's
// random first phases and ±10% steps walk randomly; a Scheduler's golden
// ratio phases on a fixed grid stay near even); the Scheduler is held to
// 1.5×.
func TestSpreadThousandProbers(t *testing.T) {
	const n, intervals = 1000, 10
	iv := 2 * time.Second
	bound := map[string]float64{"Run": 2, "Scheduler": 1.5}
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			sl := newSlices(intervals * iv)
			rnd := lockedRand(15)
			ctx, cancel := context.WithCancel(context.Background())
			s := NewScheduler(0)
			var waits []func()
			for range n {
				p, err := New(testKey, Config{Enabled: true, Interval: iv}.withDefaults(), sl.check, Options{Rand: rnd})
				if err != nil {
					t.Fatal(err)
				}
				if d.name == "Run" {
					waits = append(waits, d.run(ctx, p))
				} else {
					waits = append(waits, s.Add(ctx, p))
				}
			}
			time.Sleep(intervals * iv)
			cancel()
			for _, w := range waits {
				w()
			}
			worst := 0.0
			for i := range intervals {
				r := sl.maxOverMean(time.Duration(i)*iv, time.Duration(i+1)*iv)
				worst = max(worst, r)
				if r > bound[d.name] {
					t.Errorf("interval %d: fullest 100 ms slice has %.2f× the mean, want <= %.1f×", i, r, bound[d.name])
				}
			}
			all := sl.maxOverMean(0, intervals*iv)
			t.Logf("%s: %d probers every %v: fullest 100 ms slice %.2f× the mean over %d intervals (worst single interval %.2f×)",
				d.name, n, iv, all, intervals, worst)
		})
	})
}

// Probers added at different times, with different intervals, still
// spread: their phases count from the Scheduler's epoch, not from Add.
func TestSchedulerSpreadsProbersAddedApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		iv := 2 * time.Second
		sl := newSlices(12 * iv)
		s := NewScheduler(0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		add := func(k int, interval time.Duration) {
			for range k {
				p, err := New(testKey, Config{Enabled: true, Interval: interval}.withDefaults(), sl.check, Options{Rand: lockedRand(1)})
				if err != nil {
					t.Fatal(err)
				}
				s.Add(ctx, p)
			}
		}
		add(400, iv)
		time.Sleep(700 * time.Millisecond) // a reload adds a pool
		add(400, iv)
		time.Sleep(3100 * time.Millisecond)
		add(200, 4*time.Second) // half the rate each
		time.Sleep(12*iv - 3800*time.Millisecond)
		// From 8 s on every prober runs: 900 checks per 2 s.
		if r := sl.maxOverMean(8*time.Second, 24*time.Second); r > 1.5 {
			t.Errorf("fullest 100 ms slice has %.2f× the mean, want <= 1.5×", r)
		} else {
			t.Logf("fullest 100 ms slice %.2f× the mean", r)
		}
	})
}

// Checks that had to start late (here: one worker, held 5 s by one
// check) run as soon as they can, then go back to their slots: the next
// interval is spread as if nothing happened.
func TestSchedulerLateChecksReturnToTheirSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		iv := 2 * time.Second
		sl := newSlices(12 * iv)
		s := testScheduler(1, 0.5)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var once sync.Once
		slow := func(ctx context.Context) Outcome {
			once.Do(func() { time.Sleep(5 * time.Second) })
			return sl.check(ctx)
		}
		// The first prober added is the slow one, checked first at 1 s.
		p, err := New(testKey, Config{Enabled: true, Interval: iv, Timeout: 10 * time.Second}.withDefaults(), slow, Options{Rand: lockedRand(2)})
		if err != nil {
			t.Fatal(err)
		}
		s.Add(ctx, p)
		for range n - 1 {
			p, err := New(testKey, Config{Enabled: true, Interval: iv}.withDefaults(), sl.check, Options{Rand: lockedRand(3)})
			if err != nil {
				t.Fatal(err)
			}
			s.Add(ctx, p)
		}
		time.Sleep(12 * iv)
		// About 6 s in the worker is free: what came due meanwhile runs.
		sl.mu.Lock()
		burst := max(sl.counts[59], sl.counts[60])
		sl.mu.Unlock()
		if burst < 900 { // each of the 1,000 came due in those 5 s, and runs once
			t.Fatalf("only %d checks ran when the worker came free", burst)
		}
		// From 8 s on the checks are back on their slots.
		if r := sl.maxOverMean(8*time.Second, 24*time.Second); r > 1.5 {
			t.Errorf("after the backlog the fullest 100 ms slice has %.2f× the mean, want <= 1.5×", r)
		}
	})
}

// With a bound, no more checks run at once than it allows; the others wait
// and run when a worker frees up.
func TestSchedulerBoundsConcurrentChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 3
		var now, peak, calls atomic.Int64
		hang := func(ctx context.Context) Outcome {
			calls.Add(1)
			c := now.Add(1)
			for {
				p := peak.Load()
				if c <= p || peak.CompareAndSwap(p, c) {
					break
				}
			}
			<-ctx.Done()
			now.Add(-1)
			return Outcome{Result: Fail}
		}
		s := NewScheduler(bound)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var waits []func()
		for range 20 {
			p, err := New(testKey, Config{Enabled: true, Interval: time.Second, Timeout: 900 * time.Millisecond}.withDefaults(), hang, Options{})
			if err != nil {
				t.Fatal(err)
			}
			waits = append(waits, s.Add(ctx, p))
		}
		for range 50 {
			time.Sleep(100 * time.Millisecond)
			if st := s.Stats(); st.Checking > bound || st.Workers > bound {
				t.Fatalf("stats %+v with a bound of %d", st, bound)
			}
		}
		cancel()
		for _, w := range waits {
			w()
		}
		if peak.Load() != bound {
			t.Fatalf("at most %d checks ran at once, want %d", peak.Load(), bound)
		}
		// 20 probers, 1 s interval, 0.9 s checks: 18 would run at once
		// unbounded; 3 workers make 3 checks every 0.9 s.
		if c := calls.Load(); c < 15 || c > 18 {
			t.Fatalf("%d checks in 5 s on %d workers, want 15-18", c, bound)
		}
	})
}

// A check that outlasts the interval is followed by the first slot after
// it returns, never by a second check of the same prober in flight.
func TestSchedulerCheckOverrunsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		iv := 2 * time.Second
		var mu sync.Mutex
		var starts []time.Duration
		var inFlight atomic.Int32
		t0 := time.Now()
		slow := func(ctx context.Context) Outcome {
			if inFlight.Add(1) != 1 {
				t.Error("two checks of one prober in flight")
			}
			defer inFlight.Add(-1)
			mu.Lock()
			starts = append(starts, time.Since(t0))
			mu.Unlock()
			time.Sleep(3 * time.Second)
			return Outcome{Result: Pass}
		}
		s := testScheduler(0, 0)
		ctx, cancel := context.WithCancel(context.Background())
		p, err := New(testKey, Config{Enabled: true, Interval: iv, Timeout: 5 * time.Second}.withDefaults(), slow, Options{Rand: func() float64 { return 0.5 }})
		if err != nil {
			t.Fatal(err)
		}
		wait := s.Add(ctx, p)
		time.Sleep(13 * time.Second)
		cancel()
		wait()
		// Slots at 0, 2, 4, ...: each check ends 3 s in, so the next
		// is the slot after: 0, 4, 8, 12.
		want := []time.Duration{0, 4 * time.Second, 8 * time.Second, 12 * time.Second}
		if len(starts) != len(want) {
			t.Fatalf("checks at %v, want %v", starts, want)
		}
		for i := range want {
			if starts[i] != want[i] {
				t.Fatalf("checks at %v, want %v", starts, want)
			}
		}
	})
}

// Removing one prober (its ctx done) leaves the others checked; a check in
// flight when it is removed is waited for and not recorded.
func TestSchedulerRemovesOneProber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testScheduler(0, 0)
		release := make(chan struct{})
		entered := make(chan struct{}, 1)
		held := func(ctx context.Context) Outcome {
			entered <- struct{}{}
			<-release
			return Outcome{Result: Fail}
		}
		other := &script{}
		cfg := Config{Enabled: true, Fall: 1}.withDefaults()
		pa, _ := New(testKey, cfg, held, Options{})
		pb, _ := New(testKey, cfg, other.check, Options{})
		ctxA, cancelA := context.WithCancel(context.Background())
		ctxB, cancelB := context.WithCancel(context.Background())
		waitA := s.Add(ctxA, pa)
		waitB := s.Add(ctxB, pb)
		<-entered // a's first check is at phase 0: now
		cancelA()
		doneA := make(chan struct{})
		go func() { waitA(); close(doneA) }()
		synctest.Wait()
		select {
		case <-doneA:
			t.Fatal("wait returned with the check in flight")
		default:
		}
		close(release)
		<-doneA
		if st := pa.Status(); st.Checks != 0 || !pa.Up() {
			t.Fatalf("a check called off was recorded: %+v", st)
		}
		calls := other.calls()
		time.Sleep(10 * defaultInterval)
		if got := other.calls() - calls; got != 10 {
			t.Fatalf("the other prober had %d checks in 10 intervals", got)
		}
		if st := s.Stats(); st.Probers != 1 {
			t.Fatalf("stats %+v after one of two removed", st)
		}
		cancelB()
		waitB()
	})
}

// Seed, rise and OnChange on a Scheduler: a backend seeded down comes up
// after Rise passes, with one OnChange.
func TestSchedulerSeedDownRises(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			var changes []change
			s := &script{}
			p, err := New(testKey, Config{Enabled: true}.withDefaults(), s.check, Options{
				Rand:     func() float64 { return 0.5 },
				OnChange: func(key string, up bool) { changes = append(changes, change{key, up}) },
			})
			if err != nil {
				t.Fatal(err)
			}
			p.Seed(false)
			ctx, cancel := context.WithCancel(context.Background())
			wait := d.run(ctx, p)
			time.Sleep(defaultInterval / 2)
			synctest.Wait()
			if p.Up() || s.calls() != 1 {
				t.Fatalf("after 1 pass: up=%v calls=%d", p.Up(), s.calls())
			}
			time.Sleep(defaultInterval)
			synctest.Wait()
			if !p.Up() || len(changes) != 1 || changes[0] != (change{testKey, true}) {
				t.Fatalf("after 2 passes: up=%v changes=%v", p.Up(), changes)
			}
			cancel()
			wait()
		})
	})
}

// Once every prober is gone the Scheduler's goroutines exit, and a later
// Add starts them again.
func TestSchedulerGoroutinesExitWhenEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(0)
		for round := range 2 {
			ctx, cancel := context.WithCancel(context.Background())
			sc := &script{}
			var waits []func()
			for range 50 {
				p, _ := New(testKey, Config{Enabled: true, Interval: time.Second}.withDefaults(), sc.check, Options{})
				waits = append(waits, s.Add(ctx, p))
			}
			time.Sleep(5 * time.Second)
			if sc.calls() < 200 {
				t.Fatalf("round %d: %d checks", round, sc.calls())
			}
			cancel()
			for _, w := range waits {
				w()
			}
			synctest.Wait() // without advancing time: nothing is left to wait for
			s.mu.Lock()
			driving, workers, idle := s.driving, s.workers, len(s.idle)
			s.mu.Unlock()
			if driving || workers != 0 || idle != 0 {
				t.Fatalf("round %d: after the last prober: driving=%v workers=%d idle=%d", round, driving, workers, idle)
			}
		}
		// And the bubble ending proves no goroutine is left.
	})
}

// The same, by goroutine count, outside a bubble: on a fake clock.
func TestSchedulerLeavesNoGoroutineOutsideABubble(t *testing.T) {
	before := runtime.NumGoroutine()
	clk := clock.NewFake(time.Now())
	s := NewSchedulerWithClock(0, clk)
	ctx, cancel := context.WithCancel(context.Background())
	var checks atomic.Int64
	check := func(context.Context) Outcome { checks.Add(1); return Outcome{Result: Pass} }
	var waits []func()
	for range 200 {
		p, _ := New(testKey, Config{Enabled: true, Interval: 100 * time.Millisecond}.withDefaults(), check, Options{})
		waits = append(waits, s.Add(ctx, p))
	}
	testnet.EventuallyOn(t, clk, 10*time.Millisecond, "every prober's first check", func() bool { return checks.Load() >= 200 })
	cancel()
	for _, w := range waits {
		w()
	}
	testnet.Eventually(t, "the Scheduler's goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

// Workers a burst of slow checks started exit once idle; the steady rate
// of quick checks keeps one.
func TestSchedulerReapsIdleWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		slow.Store(true)
		check := func(ctx context.Context) Outcome {
			if slow.Load() {
				<-ctx.Done()
				return Outcome{Result: Fail}
			}
			return Outcome{Result: Pass}
		}
		s := NewScheduler(0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for range 20 {
			p, _ := New(testKey, Config{Enabled: true, Interval: time.Second, Timeout: 900 * time.Millisecond}.withDefaults(), check, Options{})
			s.Add(ctx, p)
		}
		time.Sleep(3 * time.Second)
		if w := s.Stats().Workers; w < 15 {
			t.Fatalf("%d workers for 20 probers whose checks take 0.9 s of 1 s", w)
		}
		slow.Store(false)
		time.Sleep(13 * time.Second) // workerIdle is 10 s
		// Instant checks need one worker, two when two come due within
		// the 10 ms that share a wakeup.
		if w := s.Stats().Workers; w > 2 {
			t.Fatalf("%d workers for instant checks, want 1 or 2", w)
		}
	})
}

func TestSchedulerDisabledProber(t *testing.T) {
	s := NewScheduler(0)
	p, err := New(testKey, Config{}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Add(context.Background(), p)() // returns at once
	if st := s.Stats(); st.Probers != 0 || st.Workers != 0 {
		t.Fatalf("stats %+v after a disabled prober", st)
	}
}
