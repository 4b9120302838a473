package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const testKey = "web/127.0.0.1:9001"

// script is a Check answering from a list (then Pass), counting calls and
// the time of each.
type script struct {
	mu      sync.Mutex
	answers []Result
	times   []time.Time
}

func (s *script) check(ctx context.Context) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times = append(s.times, time.Now())
	if len(s.answers) == 0 {
		return Outcome{Result: Pass}
	}
	r := s.answers[0]
	s.answers = s.answers[1:]
	if r == Pass {
		return Outcome{Result: Pass}
	}
	return Outcome{Result: r, Err: scriptErr(r, len(s.times))}
}

// scriptErr is the cause a script gives its n-th check (from 1) when it
// does not pass.
func scriptErr(r Result, n int) error { return fmt.Errorf("scripted %v, check %d", r, n) }

func (s *script) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

type change struct {
	key string
	up  bool
}

// A driver runs a Prober until ctx is done and returns a wait for it to
// stop: Run on a goroutine of its own, or a Scheduler. Both take the first
// check at Rand() of the interval (the test Scheduler's phase sequence
// starts at the prober's first Rand, on an epoch of now), so the tests
// below hold for each.
type driver struct {
	name string
	run  func(ctx context.Context, p *Prober) (wait func())
}

var drivers = []driver{
	{"Run", func(ctx context.Context, p *Prober) func() {
		done := make(chan struct{})
		go func() { p.Run(ctx); close(done) }()
		return func() { <-done }
	}},
	{"Scheduler", func(ctx context.Context, p *Prober) func() {
		return testScheduler(0, p.opts.Rand()).Add(ctx, p)
	}},
}

// testScheduler is a Scheduler whose first prober's first check comes
// offset of its interval from now.
func testScheduler(workers int, offset float64) *Scheduler {
	s := NewScheduler(workers)
	s.offset, s.epoch = offset, time.Now()
	return s
}

// start runs a Prober with no jitter (first check at Interval/2, then every
// Interval exactly) and returns a stop that cancels and waits.
func start(t *testing.T, d driver, cfg Config, s *script, changes *[]change) (*Prober, func()) {
	t.Helper()
	var mu sync.Mutex
	p, err := New(testKey, cfg, s.check, Options{
		Rand: func() float64 { return 0.5 },
		OnChange: func(key string, up bool) {
			mu.Lock()
			*changes = append(*changes, change{key, up})
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := d.run(ctx, p)
	return p, func() { cancel(); wait() }
}

// forEachDriver runs f as a subtest for each driver.
func forEachDriver(t *testing.T, f func(t *testing.T, d driver)) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) { f(t, d) })
	}
}

func TestRiseAndFall(t *testing.T) {
	P, F, I := Pass, Fail, Inconclusive
	tests := []struct {
		name    string
		answers []Result
		wantUp  []bool // Up after each check
		changes []bool // OnChange values in order
	}{
		{"starts up, passes keep it up", []Result{P, P}, []bool{true, true}, nil},
		{"falls on the 3rd consecutive failure", []Result{F, F, F}, []bool{true, true, false}, []bool{false}},
		{"a pass resets the fall streak", []Result{F, F, P, F, F, F}, []bool{true, true, true, true, true, false}, []bool{false}},
		{"rises on the 2nd consecutive pass", []Result{F, F, F, P, P}, []bool{true, true, false, false, true}, []bool{false, true}},
		{"a failure resets the rise streak", []Result{F, F, F, P, F, P, P}, []bool{true, true, false, false, false, false, true}, []bool{false, true}},
		{"inconclusive counts neither way", []Result{F, I, F, I, I, F}, []bool{true, true, true, true, true, false}, []bool{false}},
		{"inconclusive never takes it down", []Result{I, I, I, I, I}, []bool{true, true, true, true, true}, nil},
		{"inconclusive never brings it up", []Result{F, F, F, P, I, I, P}, []bool{true, true, false, false, false, false, true}, []bool{false, true}},
	}
	forEachDriver(t, func(t *testing.T, d driver) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := &script{answers: tc.answers}
					var changes []change
					p, stop := start(t, d, Config{Enabled: true}.withDefaults(), s, &changes)
					defer stop()
					if !p.Up() {
						t.Fatal("a backend must start up")
					}
					time.Sleep(defaultInterval / 2) // first check
					for i, want := range tc.wantUp {
						synctest.Wait()
						if s.calls() != i+1 {
							t.Fatalf("check %d: %d checks made", i, s.calls())
						}
						if p.Up() != want {
							t.Fatalf("after check %d (%v): up=%v, want %v", i, tc.answers[i], p.Up(), want)
						}
						time.Sleep(defaultInterval)
					}
					stop()
					if len(changes) != len(tc.changes) {
						t.Fatalf("changes = %v, want %v", changes, tc.changes)
					}
					for i, c := range changes {
						if c.up != tc.changes[i] || c.key != testKey {
							t.Fatalf("change %d = %+v, want up=%v", i, c, tc.changes[i])
						}
					}
				})
			})
		}
	})
}

func TestDisabledNeverDials(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			s := &script{answers: []Result{Fail, Fail, Fail}}
			var changes []change
			p, stop := start(t, d, Config{Enabled: false}, s, &changes)
			time.Sleep(time.Hour)
			stop()
			if s.calls() != 0 || !p.Up() || len(changes) != 0 {
				t.Fatalf("disabled prober: calls=%d up=%v changes=%v", s.calls(), p.Up(), changes)
			}
		})
	})
}

// Each check gets Timeout; a check that hangs is cut off and fails.
func TestTimeoutBoundsCheck(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			var deadlines []time.Duration
			var mu sync.Mutex
			hang := func(ctx context.Context) Outcome {
				d, _ := ctx.Deadline()
				mu.Lock()
				deadlines = append(deadlines, time.Until(d))
				mu.Unlock()
				<-ctx.Done()
				return Outcome{Result: Fail}
			}
			p, err := New(testKey, Config{Enabled: true, Timeout: 300 * time.Millisecond, Fall: 1}.withDefaults(), hang, Options{Rand: func() float64 { return 0 }})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			wait := d.run(ctx, p)
			time.Sleep(300 * time.Millisecond)
			synctest.Wait()
			if p.Up() {
				t.Fatal("hanging check did not fail at its timeout")
			}
			cancel()
			wait()
			if deadlines[0] != 300*time.Millisecond {
				t.Fatalf("check deadline = %v, want 300ms", deadlines[0])
			}
		})
	})
}

func TestJitterSpreadsChecks(t *testing.T) {
	// Start to start, Run's checks are Interval ±10% apart, a Scheduler's
	// ±5% (±2.5% around slots on a fixed grid).
	spread := map[string]time.Duration{"Run": 10, "Scheduler": 5}
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			const n = 20
			interval := 2 * time.Second
			var seq atomic.Uint64
			// A deterministic spread of Rand values in [0, 1).
			rnd := func() float64 { return float64(seq.Add(7)%n) / n }
			t0 := time.Now()
			scripts := make([]*script, n)
			ctx, cancel := context.WithCancel(context.Background())
			var waits []func()
			var s *Scheduler // the probers share one
			for i := range scripts {
				scripts[i] = &script{}
				p, err := New(testKey, Config{Enabled: true, Interval: interval}.withDefaults(), scripts[i].check, Options{Rand: rnd})
				if err != nil {
					t.Fatal(err)
				}
				if d.name == "Run" {
					waits = append(waits, d.run(ctx, p))
					continue
				}
				if s == nil {
					s = NewScheduler(0)
				}
				waits = append(waits, s.Add(ctx, p))
			}
			time.Sleep(10 * interval)
			cancel()
			for _, w := range waits {
				w()
			}
			firsts := map[time.Duration]bool{}
			for i, s := range scripts {
				first := s.times[0].Sub(t0)
				if first < 0 || first >= interval {
					t.Fatalf("prober %d first check at %v, want within [0, %v)", i, first, interval)
				}
				firsts[first] = true
				for j := 1; j < len(s.times); j++ {
					gap := s.times[j].Sub(s.times[j-1])
					if pct := spread[d.name]; gap < interval*(100-pct)/100 || gap > interval*(100+pct)/100 {
						t.Fatalf("prober %d gap %v outside interval ±%d%%", i, gap, pct)
					}
				}
			}
			if len(firsts) < n/2 {
				t.Fatalf("first checks of %d probers fell on only %d distinct instants", n, len(firsts))
			}
		})
	})
}

// Cancelling Run leaves no goroutine: synctest.Test fails if the bubble
// still holds one when the function returns.
func TestCancelLeavesNoGoroutine(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) { testCancelLeavesNoGoroutine(t, d) })
}

func testCancelLeavesNoGoroutine(t *testing.T, d driver) {
	for _, inFlight := range []bool{false, true} {
		name := map[bool]string{false: "between checks", true: "during a check"}[inFlight]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				entered := make(chan struct{}, 1)
				check := func(ctx context.Context) Outcome {
					entered <- struct{}{}
					if inFlight {
						<-ctx.Done()
					}
					return Outcome{Result: Pass}
				}
				p, err := New(testKey, Config{Enabled: true}.withDefaults(), check, Options{})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				wait := d.run(ctx, p)
				go func() { wait(); close(done) }()
				<-entered
				synctest.Wait() // Run is durably blocked: in the check or on its timer
				cancel()
				synctest.Wait() // everything that can run has run, without advancing time
				select {
				case <-done:
				default:
					t.Fatal("Run did not return after cancel")
				}
				// And the bubble ending proves no other goroutine was left.
			})
		})
	}
}

func TestStatus(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			s := &script{answers: []Result{Fail, Inconclusive}}
			var changes []change
			p, stop := start(t, d, Config{Enabled: true}.withDefaults(), s, &changes)
			defer stop()
			if st := p.Status(); !st.Up || st.Checks != 0 || !st.LastCheck.IsZero() {
				t.Fatalf("initial status %+v", st)
			}
			time.Sleep(defaultInterval/2 + defaultInterval)
			synctest.Wait()
			st := p.Status()
			if st.Checks != 2 || st.Fails != 1 || st.LastResult != Inconclusive || !st.LastCheck.Equal(time.Now()) {
				t.Fatalf("status after F, I: %+v", st)
			}
		})
	})
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		check Check
		ok    bool
	}{
		{"complete", Config{Enabled: true}.withDefaults(), func(context.Context) Outcome { return Outcome{Result: Pass} }, true},
		{"enabled, no defaults here", Config{Enabled: true}, func(context.Context) Outcome { return Outcome{Result: Pass} }, false},
		{"negative interval", Config{Enabled: true, Interval: -1}.withDefaults(), func(context.Context) Outcome { return Outcome{Result: Pass} }, false},
		{"negative fall", Config{Fall: -3}, nil, false},
		{"enabled without a check", Config{Enabled: true}.withDefaults(), nil, false},
		{"disabled without a check", Config{}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(testKey, tc.cfg, tc.check, Options{})
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// recorder is a slog handler that keeps every record, at every level.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recorder) WithGroup(string) slog.Handler      { return h }

// logged is one record in short: level, message and attributes as text.
type logged struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *recorder) take() []logged {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logged
	for _, r := range h.records {
		l := logged{level: r.Level, msg: r.Message, attrs: map[string]string{}}
		r.Attrs(func(a slog.Attr) bool {
			l.attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, l)
	}
	h.records = nil
	return out
}

// Status.LastError is the last check's cause: set by a failure or an
// inconclusive check, cleared by a pass.
func TestStatusLastError(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			s := &script{answers: []Result{Fail, Pass, Inconclusive, Pass}}
			var changes []change
			p, stop := start(t, d, Config{Enabled: true}.withDefaults(), s, &changes)
			defer stop()
			if st := p.Status(); st.LastError != "" {
				t.Fatalf("LastError before the first check: %q", st.LastError)
			}
			time.Sleep(defaultInterval / 2)
			for i, want := range []string{
				scriptErr(Fail, 1).Error(), "", scriptErr(Inconclusive, 3).Error(), "",
			} {
				synctest.Wait()
				if st := p.Status(); st.LastError != want || st.Checks != uint64(i+1) {
					t.Fatalf("after check %d (%v): LastError %q, want %q (status %+v)", i+1, st.LastResult, st.LastError, want, st)
				}
				time.Sleep(defaultInterval)
			}
		})
	})
}

// A check that fails or is inconclusive without a cause of its own still
// leaves one; a pass with an error leaves none.
func TestStatusLastErrorWithoutCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		check := func(context.Context) Outcome {
			if n.Add(1) == 1 {
				return Outcome{Result: Fail}
			}
			return Outcome{Result: Pass, Err: errors.New("ignored on a pass")}
		}
		p, err := New(testKey, Config{Enabled: true}.withDefaults(), check, Options{Rand: func() float64 { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { p.Run(ctx); close(done) }()
		synctest.Wait()
		if st := p.Status(); st.LastResult != Fail || st.LastError != errNoCause.Error() {
			t.Fatalf("a failure without a cause: %+v", st)
		}
		time.Sleep(defaultInterval * 11 / 10)
		synctest.Wait()
		if st := p.Status(); st.LastResult != Pass || st.LastError != "" {
			t.Fatalf("a pass with an error: %+v", st)
		}
		cancel()
		<-done
	})
}

// Every check that fails or is inconclusive is logged at debug once, with
// its result and cause; a pass is not logged; the info line of a change to
// down carries the cause of the check that made it.
func TestFailedChecksLogged(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d driver) {
		synctest.Test(t, func(t *testing.T) {
			answers := []Result{Fail, Inconclusive, Pass, Fail, Fail}
			s := &script{answers: answers}
			rec := &recorder{}
			p, err := New(testKey, Config{Enabled: true, Fall: 2, Rise: 1}.withDefaults(), s.check, Options{
				Rand: func() float64 { return 0.5 }, Logger: slog.New(rec),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			wait := d.run(ctx, p)
			defer func() { cancel(); wait() }()
			time.Sleep(defaultInterval / 2)
			for i, r := range answers {
				synctest.Wait()
				if s.calls() != i+1 {
					t.Fatalf("check %d: %d checks made", i+1, s.calls())
				}
				got := rec.take()
				var debug []logged
				for _, l := range got {
					if l.level == slog.LevelDebug {
						debug = append(debug, l)
					}
				}
				if r == Pass {
					if len(debug) != 0 {
						t.Fatalf("check %d passed and logged %+v", i+1, debug)
					}
				} else {
					msg := map[Result]string{Fail: "health check failed", Inconclusive: "health check inconclusive"}[r]
					cause := scriptErr(r, i+1).Error()
					if len(debug) != 1 || debug[0].msg != msg || debug[0].attrs["result"] != r.String() || debug[0].attrs["error"] != cause {
						t.Fatalf("check %d (%v) logged %+v at debug; want one %q with result %v and error %q", i+1, r, debug, msg, r, cause)
					}
				}
				// The second failure in a row (fall 2) takes it down.
				if i == len(answers)-1 {
					var down []logged
					for _, l := range got {
						if l.level == slog.LevelInfo && l.msg == "health changed" {
							down = append(down, l)
						}
					}
					if len(down) != 1 || down[0].attrs["health"] != "down" || down[0].attrs["error"] != scriptErr(Fail, 5).Error() {
						t.Fatalf("the change to down logged %+v; want health=down with the failed check's error", down)
					}
					if p.Up() {
						t.Fatal("two failures with fall 2 left it up")
					}
				}
				time.Sleep(defaultInterval)
			}
		})
	})
}
