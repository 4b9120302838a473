package breaker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

const testKey = "web/127.0.0.1:9001"

// recorder counts Events.
type recorder struct {
	mu     sync.Mutex
	counts map[string]int
	dials  map[string]int // "kind/result"
}

func newRecorder() *recorder {
	return &recorder{counts: map[string]int{}, dials: map[string]int{}}
}

func (r *recorder) events() Events {
	inc := func(name string) func(string) {
		return func(key string) {
			r.mu.Lock()
			r.counts[name]++
			r.mu.Unlock()
		}
	}
	incState := func(name string) func(string, State) {
		f := inc(name)
		return func(key string, _ State) { f(key) }
	}
	return Events{
		Trip: incState("trip"), Close: incState("close"), Reopen: incState("reopen"),
		ProbeFailure: inc("probe_failure"), Stale: inc("stale"), Dropped: inc("dropped"),
		Dial: func(key string, k Kind, res Result) {
			r.mu.Lock()
			r.dials[k.String()+"/"+res.String()]++
			r.mu.Unlock()
		},
	}
}

func (r *recorder) n(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

func (r *recorder) dial(kindResult string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dials[kindResult]
}

// logCapture is a slog.Handler that keeps every record.
type logCapture struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

func (h *logCapture) count(level slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level {
			n++
		}
	}
	return n
}

// nowClock reads the time from now and makes the runtime's timers (the
// bubble's, under synctest): an instance whose clock is off (rule 7), or
// the fuzz harness's time, which it moves itself.
type nowClock struct {
	clock.Real
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

// fakeProbe is an injectable Probe: it answers from next (Success by
// default) and, when hold is set, blocks until released.
type fakeProbe struct {
	calls atomic.Int64
	mu    sync.Mutex
	next  []Result
	hold  chan struct{} // nil: do not block
}

func (p *fakeProbe) probe(ctx context.Context) Result {
	p.calls.Add(1)
	p.mu.Lock()
	hold := p.hold
	r := Success
	if len(p.next) > 0 {
		r, p.next = p.next[0], p.next[1:]
	}
	p.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return Local
		}
	}
	return r
}

func (p *fakeProbe) answer(rs ...Result) {
	p.mu.Lock()
	p.next = append(p.next, rs...)
	p.mu.Unlock()
}

type fixture struct {
	t     *testing.T
	store *MemoryStore
	b     *Breaker
	ev    *recorder
	logs  *logCapture
	probe *fakeProbe
}

// newFixture builds one breaker on a fresh MemoryStore. It must be called
// inside a synctest bubble so time.Now is the fake clock.
func newFixture(t *testing.T, cfg Config, tweak func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, store: NewMemoryStore(nil), ev: newRecorder(), logs: &logCapture{}, probe: &fakeProbe{}}
	f.b = f.add(cfg, tweak)
	return f
}

// add builds another breaker (another instance) on the fixture's store.
func (f *fixture) add(cfg Config, tweak func(*Options)) *Breaker {
	f.t.Helper()
	opts := Options{
		Logger: slog.New(f.logs),
		Events: f.ev.events(),
		Probe:  f.probe.probe,
		Rand:   func() float64 { return 0.5 }, // no jitter unless a test asks
	}
	if tweak != nil {
		tweak(&opts)
	}
	b, err := New(testKey, cfg.withDefaults(), f.store, opts)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return b
}

// run starts b.Run and returns a function that stops it and waits.
func run(b *Breaker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// dial records one dial of kind k with result r on b.
func dial(b *Breaker, k Kind, r Result) {
	b.Done(b.Begin(k), r)
}

func (f *fixture) storeState() State {
	f.t.Helper()
	st, err := f.store.Read(context.Background(), testKey)
	if err != nil {
		f.t.Fatalf("Read: %v", err)
	}
	return st
}

// trip fails client dials until b trips.
func trip(t *testing.T, b *Breaker) {
	t.Helper()
	for i := 0; i < b.Config().Failures; i++ {
		dial(b, KindClient, Failure)
	}
	if !b.State().Open {
		t.Fatalf("breaker did not trip after %d failures", b.Config().Failures)
	}
}
