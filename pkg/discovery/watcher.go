package discovery

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// Options are what a Watcher reports to.
type Options struct {
	// Pool is the pool's name, for logs and metric labels.
	Pool string
	// Clock times the refreshes and the empty grace; nil: clock.Real.
	// Query timeouts are on the sockets' own (real) clock.
	Clock clock.Clock
	// Log receives the state changes; nil: discarded.
	Log *slog.Logger
	// Metrics, when not nil, counts the lookups and gauges the set.
	Metrics *Metrics
	// OnChange is called from the watcher's goroutine with every set that
	// differs from the one reported before, and once after the first
	// lookup whatever it found: the set, or the empty set when the first
	// lookup failed or found no records (there is nothing to keep, so
	// the grace does not wait). A pool therefore starts empty when DNS is
	// down. The Set is the callee's to keep.
	OnChange func(Set)
	// Initial, when not empty, is the set a watcher of the pool reported
	// last in another process (an upgrade's old one), taken as this
	// watcher's own last report: a first lookup that fails keeps it, one
	// that finds no records starts the empty grace, and the first report
	// is of a set that differs from it.
	Initial []Backend
}

// Status is a Watcher's state, for the admin API.
type Status struct {
	// LastSuccess is when a lookup last got an answer (records, or an
	// answer that there are none); zero: never.
	LastSuccess time.Time
	// Failing: the last lookup failed (an error or a timeout), so the set
	// reported is the last good one; since FailingSince.
	Failing      bool
	FailingSince time.Time
	// LastError is the last failed lookup's error ("" if none yet); it
	// stays after the lookups recover.
	LastError string
	// EmptySince, when not zero, is when the answers began to say there
	// are no records while the last set is kept (EmptyGrace).
	EmptySince time.Time
	// Backends is the number of backends in the set reported last.
	Backends int
}

// Watcher resolves one Spec again and again until its Run ends.
type Watcher struct {
	plan   plan
	opt    Options
	clk    clock.Clock
	log    *slog.Logger
	res    resolvers
	series *poolSeries // nil without Options.Metrics

	// onWait, in tests, is called with each wait's length once its timer
	// is armed.
	onWait func(time.Duration)

	// Run's own: the set reported last and the failure streak.
	reported bool
	last     Set
	failures int

	mu     sync.Mutex
	status Status
}

// NewWatcher checks spec and makes a Watcher for it; an unusable spec is
// an error. Nothing is resolved before Run.
func NewWatcher(spec Spec, opt Options) (*Watcher, error) {
	p, err := compile(spec)
	if err != nil {
		return nil, err
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{plan: p, opt: opt, clk: clock.Or(opt.Clock), log: log.With("pool", opt.Pool, "name", p.name)}
	w.res.plan = &w.plan
	if opt.Metrics != nil {
		w.series = opt.Metrics.pool(opt.Pool)
	}
	if len(opt.Initial) > 0 {
		w.reported, w.last = true, Set{Backends: normalize(slices.Clone(opt.Initial))}
		w.status.Backends = len(w.last.Backends)
		w.series.setBackends(len(w.last.Backends))
	}
	return w, nil
}

// Run resolves at once, then again when each answer's refresh is due,
// until ctx ends; it returns once its lookup, if one is in flight, has
// ended. Call it once.
func (w *Watcher) Run(ctx context.Context) {
	for {
		o := w.lookup(ctx)
		if ctx.Err() != nil {
			return // a lookup cut short by the stop is no answer
		}
		wait := w.apply(o)
		t, fire := w.clk.NewTimer(wait)
		if w.onWait != nil {
			w.onWait(wait) // armed first: a test may move its clock now
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-fire:
		}
	}
}

// Status is the watcher's state now.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// apply takes a lookup's outcome into the state and says when to look
// again.
func (w *Watcher) apply(o outcome) time.Duration {
	now := w.clk.Now()
	w.series.count(o.result, now)
	if !o.result.answered() {
		w.failed(now, o)
		if !w.reported {
			w.report(Set{At: now})
		}
		return w.inGrace(now, w.backoff())
	}
	w.answered(now)
	refresh := w.refresh(o.ttl)
	if o.result == resultOK {
		w.endGrace(slog.LevelInfo, "records again: the grace is over", len(o.backends))
		w.report(Set{Backends: o.backends, At: now})
		return refresh
	}
	if !w.reported || len(w.last.Backends) == 0 {
		w.report(Set{At: now}) // nothing to keep
		return refresh
	}
	w.mu.Lock()
	begins := w.status.EmptySince.IsZero()
	if begins {
		w.status.EmptySince = now
	}
	w.mu.Unlock()
	if begins {
		w.log.Warn("discovery: no records: keeping the last set for empty_grace",
			"result", o.result.String(), "backends", len(w.last.Backends), "empty_grace", w.plan.spec.EmptyGrace)
	}
	return w.inGrace(now, refresh)
}

// inGrace reports the empty set once the grace that began at EmptySince
// is over (a failed lookup does not refute the answer that said there
// are no records, so it does not hold the grace off); until then the
// next lookup is due no later than the grace's end.
func (w *Watcher) inGrace(now time.Time, next time.Duration) time.Duration {
	w.mu.Lock()
	since := w.status.EmptySince
	w.mu.Unlock()
	if since.IsZero() {
		return next
	}
	left := since.Add(w.plan.spec.EmptyGrace).Sub(now)
	if left > 0 {
		return min(next, left)
	}
	w.endGrace(slog.LevelWarn, "no records for empty_grace: the set is empty", 0)
	w.report(Set{At: now})
	return next
}

// endGrace ends an empty grace, if one runs, with a log line.
func (w *Watcher) endGrace(level slog.Level, msg string, backends int) {
	w.mu.Lock()
	since := w.status.EmptySince
	w.status.EmptySince = time.Time{}
	w.mu.Unlock()
	if !since.IsZero() {
		w.log.Log(context.Background(), level, "discovery: "+msg, "backends", backends, "empty_for", w.clk.Now().Sub(since))
	}
}

// refresh is when to look again after an answer: at its lowest TTL,
// within [MinRefresh, MaxRefresh].
func (w *Watcher) refresh(ttl uint32) time.Duration {
	d := time.Duration(ttl) * time.Second
	if ttl == noTTL {
		d = w.plan.spec.MinRefresh // nothing says how long: look soon
	}
	return min(max(d, w.plan.spec.MinRefresh), w.plan.spec.MaxRefresh)
}

// backoff is when to look again after the failures in a row so far:
// MinRefresh, doubled with each failure, at most MaxRefresh.
func (w *Watcher) backoff() time.Duration {
	d := w.plan.spec.MinRefresh
	for i := 1; i < w.failures && d < w.plan.spec.MaxRefresh; i++ {
		d *= 2
	}
	return min(d, w.plan.spec.MaxRefresh)
}

// failed records a failed lookup; the first of a streak logs that the
// failing state begins.
func (w *Watcher) failed(now time.Time, o outcome) {
	w.failures++
	w.mu.Lock()
	begins := !w.status.Failing
	if begins {
		w.status.Failing, w.status.FailingSince = true, now
	}
	w.status.LastError = o.err.Error()
	never := !w.reported // no set yet: neither an answer nor an upgrade's handed-over one
	w.mu.Unlock()
	switch {
	case begins && never:
		w.log.Warn("discovery: lookups failing before any answer: no backend of the pool is found in DNS until they answer",
			"result", o.result.String(), "error", o.err)
	case begins:
		w.log.Warn("discovery: lookups failing: keeping the last set until they answer",
			"result", o.result.String(), "backends", len(w.last.Backends), "error", o.err)
	}
}

// answered records an answer; the first after failures logs that the
// failing state ends.
func (w *Watcher) answered(now time.Time) {
	failures := w.failures
	w.failures = 0
	w.mu.Lock()
	ends, since := w.status.Failing, w.status.FailingSince
	w.status.Failing, w.status.FailingSince, w.status.LastSuccess = false, time.Time{}, now
	w.mu.Unlock()
	if ends {
		w.log.Info("discovery: lookups answer again", "failed_lookups", failures, "failing_for", now.Sub(since))
	}
}

// report hands s to OnChange if it differs from the set reported last,
// or is the first.
func (w *Watcher) report(s Set) {
	if w.reported && slices.Equal(s.Backends, w.last.Backends) {
		return
	}
	first := !w.reported
	w.reported, w.last = true, s
	w.mu.Lock()
	w.status.Backends = len(s.Backends)
	w.mu.Unlock()
	w.series.setBackends(len(s.Backends))
	w.log.Info("discovery: backends", "backends", len(s.Backends), "first", first)
	if w.opt.OnChange != nil {
		w.opt.OnChange(Set{Backends: slices.Clone(s.Backends), At: s.At})
	}
}
