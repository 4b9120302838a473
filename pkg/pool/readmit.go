package pool

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/l4lb/l4lb/pkg/health"
)

// readmission is what fast readmission knows about the active health
// checks of one backend: the breaker generation that the first check of
// the current passing streak captured when it began. When the checks bring
// the backend back (down -> up) and that generation is the breaker's open
// one, every check of the streak began after the trip: fresh evidence, so
// the breaker probes at once instead of waiting out its cooldown. The probe
// still decides (docs/breaker.md, rule 3); health results never reach the breaker.
type readmission struct {
	// streakFrom is the generation + 1 captured by the streak's first
	// check; 0: no passing streak.
	streakFrom atomic.Uint64
}

// record notes one health check that began at breaker generation gen.
// Checks of one backend run one at a time (health.Prober.Run, or the process's health.Scheduler).
func (r *readmission) record(gen uint64, res health.Result) {
	switch res {
	case health.Pass:
		r.streakFrom.CompareAndSwap(0, gen+1)
	case health.Fail:
		r.streakFrom.Store(0)
	}
	// Inconclusive (local trouble) breaks no streak, as in the prober.
}

// streakSince reports whether the current passing streak began at
// generation gen or later.
func (r *readmission) streakSince(gen uint64) bool {
	from := r.streakFrom.Load()
	return from != 0 && from-1 >= gen
}

// Errors of Probe.
var (
	ErrBreakerClosed = errors.New("the breaker is closed: there is nothing to probe")
	ErrDisabled      = errors.New("the backend is disabled by an operator: probes skip it until it is enabled")
)

// Probe asks b's breaker for its recovery probe now rather than at the end
// of its cooldown (an operator's request). The probe runs in the
// background, single flight; its result decides as any probe's does.
func (p *Pool) Probe(ctx context.Context, b *Backend) error {
	if err := b.breaker.Refresh(ctx); err != nil {
		return err
	}
	st := b.breaker.State()
	switch {
	case st.Disabled:
		return ErrDisabled
	case !st.Open:
		return ErrBreakerClosed
	}
	p.log.Info("breaker probe requested by operator", "backend", b.Addr, "generation", st.Generation)
	b.breaker.ProbeNow()
	return nil
}

// healthChanged is the prober's OnChange: usability follows, and a backend
// whose checks all began after the trip and now pass is probed at once.
func (p *Pool) healthChanged(b *Backend, up bool) {
	st := b.breaker.State()
	b.setUsable(b.usableFrom(st), p.clock.Now)
	if up && st.Open && !st.Disabled && b.readmit.streakSince(st.Generation) {
		p.log.Info("health checks begun after the trip pass: probing the breaker now",
			"backend", b.Addr, "generation", st.Generation, "cooldown_left", st.CooldownLeft)
		b.breaker.ProbeNow()
	}
}
