package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// Options are a Prober's injected dependencies; every field is optional.
type Options struct {
	// Logger gets up/down changes (info; a change to down carries the
	// failed check's error) and every check that fails or is inconclusive
	// (debug, one line per check, with its result and error). The caller
	// attaches the attributes that name the backend; the prober adds none.
	// nil: discard.
	Logger *slog.Logger
	// OnChange is called on every up/down change, with the key passed to
	// New, from the goroutine that made the check: Run's, or a Scheduler's
	// worker. It must not block for long (on a Scheduler it holds a worker).
	OnChange func(key string, up bool)
	// Clock stamps Status.LastCheck and times Run's checks; a check's
	// Timeout stays real time (context deadline): the check waits on the
	// network. nil: clock.Real.
	Clock clock.Clock
	// Rand returns a float in [0, 1) for the jitter. nil: math/rand/v2.
	Rand func() float64
}

// Status is a Prober's state for the admin API.
type Status struct {
	Up bool
	// Passes and Fails are the current streaks (Inconclusive breaks none).
	Passes, Fails int
	LastResult    Result
	// LastError is why the last check failed or was inconclusive (its
	// Outcome.Err); "" after a pass and before the first check.
	LastError string
	LastCheck time.Time // zero before the first check
	Checks    uint64    // checks made, Inconclusive included
}

// Prober checks one backend. Up is safe from any goroutine. A Prober is
// run once, by Run (a goroutine of its own) or by Scheduler.Add (a
// Scheduler shared by many probers).
type Prober struct {
	key   string
	cfg   Config
	check Check
	opts  Options
	log   *slog.Logger

	up atomic.Bool

	mu      sync.Mutex
	status  Status
	lastErr error // Status.LastError, formatted when Status is asked for
}

// New returns a Prober for key that starts up.
func New(key string, cfg Config, check Check, opts Options) (*Prober, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if check == nil && cfg.Enabled {
		return nil, fmt.Errorf("%w: nil check", ErrInvalidConfig)
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Rand == nil {
		opts.Rand = mathrand.Float64
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Prober{key: key, cfg: cfg, check: check, opts: opts, log: log}
	p.up.Store(true)
	p.status.Up = true
	return p, nil
}

// Seed sets the state a Prober starts from, before Run: down for a
// backend added by a reload (checked before use), or what an earlier
// prober of the same backend knew (a reload or an upgrade carries it).
func (p *Prober) Seed(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up.Store(up)
	p.status.Up = up
}

// Up reports whether the backend is health-up. Lock-free.
func (p *Prober) Up() bool { return p.up.Load() }

// Status returns a copy of the current state.
func (p *Prober) Status() Status {
	p.mu.Lock()
	st, err := p.status, p.lastErr
	p.mu.Unlock()
	if err != nil {
		st.LastError = err.Error()
	}
	return st
}

// Run checks the backend until ctx is done and returns once its check in
// flight (if any) has returned. With Enabled false it returns at once and the
// backend stays up. The first check comes after a random fraction of
// Interval, each later one after Interval ±10%, so checks of many backends
// spread out instead of aligning.
func (p *Prober) Run(ctx context.Context) {
	if !p.cfg.Enabled {
		return
	}
	timer, tick := p.opts.Clock.NewTimer(time.Duration(p.opts.Rand() * float64(p.cfg.Interval)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		o := p.check(cctx)
		cancel()
		if ctx.Err() != nil {
			return // stopped mid-check: the result says nothing
		}
		p.record(o)
		timer.Reset(time.Duration(float64(p.cfg.Interval) * (0.9 + 0.2*p.opts.Rand())))
	}
}

// errNoCause stands in for the cause of a Fail or Inconclusive whose
// check gave none.
var errNoCause = errors.New("the check gave no cause")

// record applies rise/fall to one check's outcome, and logs it when it did
// not pass.
func (p *Prober) record(o Outcome) {
	r, cause := o.Result, o.Err
	if r == Pass {
		cause = nil
	} else if cause == nil {
		cause = errNoCause
	}
	p.mu.Lock()
	s := &p.status
	s.Checks++
	s.LastResult = r
	s.LastCheck = p.opts.Clock.Now()
	p.lastErr = cause
	switch r {
	case Pass:
		s.Passes++
		s.Fails = 0
	case Fail:
		s.Fails++
		s.Passes = 0
	}
	changed := false
	if s.Up && s.Fails >= p.cfg.Fall {
		s.Up, changed = false, true
	} else if !s.Up && s.Passes >= p.cfg.Rise {
		s.Up, changed = true, true
	}
	up := s.Up
	p.mu.Unlock()
	if r != Pass && p.log.Enabled(context.Background(), slog.LevelDebug) {
		// Once per check, here only: neither Run nor a Scheduler logs it.
		msg := "health check failed"
		if r == Inconclusive {
			msg = "health check inconclusive"
		}
		p.log.Debug(msg, "result", r.String(), "error", cause)
	}
	if !changed {
		return
	}
	p.up.Store(up)
	if up {
		p.log.Info("health changed", "health", upDown(up), "result", r.String())
	} else {
		p.log.Info("health changed", "health", upDown(up), "result", r.String(), "error", cause)
	}
	if p.opts.OnChange != nil {
		p.opts.OnChange(p.key, up)
	}
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}
