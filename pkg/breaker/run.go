package breaker

import (
	"context"
	"sync"
	"time"
)

// Run keeps the local snapshot fresh and, once the cooldown has run out,
// probes the backend (rule 3): one probe at a time in this instance, and one
// fleet-wide under the Store's probe lock. It skips disabled backends and
// returns when ctx is done, after its probe (if any) has returned.
func (b *Breaker) Run(ctx context.Context) {
	var probes sync.WaitGroup
	defer probes.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("breaker snapshot refresh failed", "error", err)
		}
		wait := b.opts.SnapshotRefresh
		if s := b.State(); s.Open && !s.Disabled && b.opts.Probe != nil {
			if s.CooldownLeft > 0 {
				wait = min(wait, s.CooldownLeft)
			} else if b.probing.CompareAndSwap(false, true) {
				probes.Go(func() {
					defer b.probing.Store(false)
					b.probe(ctx)
				})
			}
		}
		timer.Reset(wait)
	}
}

// probe makes one recovery dial if this instance wins the probe lock and the
// Store still says open, not disabled, cooldown run out.
func (b *Breaker) probe(ctx context.Context) {
	got, err := b.store.AcquireProbe(ctx, b.key, b.opts.Owner, b.opts.ProbeLockTTL)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("breaker probe lock unavailable", "error", err)
		}
		return
	}
	if !got {
		return // another instance is probing
	}
	defer func() {
		rctx, cancel := b.storeCtx()
		defer cancel()
		if err := b.store.ReleaseProbe(rctx, b.key, b.opts.Owner); err != nil {
			b.log.Warn("breaker probe lock not released; it expires by TTL", "error", err)
		}
	}()
	// Re-read under the lock: the snapshot that started us may be stale,
	// and the attempt must capture the Store's generation.
	st, err := b.store.Read(ctx, b.key)
	if err != nil {
		return
	}
	b.publish(st)
	if !st.Open || st.Disabled || st.CooldownLeft > 0 {
		return
	}
	a := Attempt{Kind: KindProbe, Generation: st.Generation}
	pctx, cancel := context.WithTimeout(ctx, b.opts.ProbeLockTTL)
	r := b.opts.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		r = Local // shutting down: the result says nothing about the backend
	}
	b.Done(a, r)
}
