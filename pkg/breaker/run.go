package breaker

import (
	"context"
	"sync"
	"time"
)

// Run keeps the local snapshot fresh and, once the cooldown has run out (or
// ProbeNow asked), probes the backend (rule 3): one probe at a time in this
// instance, and one fleet-wide under the Store's probe lock. It skips
// disabled backends and returns when ctx is done, after its probe (if any)
// has returned.
func (b *Breaker) Run(ctx context.Context) {
	b.start()
	var left []asyncOp              // taken from the queue as Run stops
	defer func() { b.stop(left) }() // after the probe: the queue is final only then
	var probes sync.WaitGroup
	defer probes.Wait()
	if n, ok := b.store.(Notifier); ok {
		defer n.Watch(b.key, b.changed)()
	}
	timer, tick := b.opts.Clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case op := <-b.ops: // Async: a transition Done decided
			if ctx.Err() != nil {
				left = append(left, op) // stopping: the successor makes it, if any
				return
			}
			// A transition begun is finished, within StoreTimeout, even if
			// ctx ends meanwhile: cut off, it would be lost.
			octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.StoreTimeout)
			b.apply(octx, op)
			cancel()
			continue
		case <-tick:
		case <-b.wake: // ProbeNow or a Store change; timer.Reset below discards the pending tick (Go 1.23 timers)
		}
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("breaker snapshot refresh failed", "error", err)
		}
		wait := b.opts.SnapshotRefresh
		s := b.State()
		req := b.probeNow.Load()
		if req != 0 && req-1 != s.Generation {
			// Asked at a generation that has since ended (a probe
			// elsewhere in the fleet answered it): the request is moot.
			b.probeNow.CompareAndSwap(req, 0)
			req = 0
		}
		if !s.Open || s.Disabled {
			b.probeNow.Store(0) // nothing to probe: the request is moot
		} else if b.opts.Probe != nil {
			early := req != 0
			if s.CooldownLeft > 0 && !early {
				wait = min(wait, s.CooldownLeft)
			} else if b.probing.CompareAndSwap(false, true) {
				b.probeNow.Store(0)
				probes.Go(func() {
					defer b.probing.Store(false)
					b.probe(ctx, early, s.Generation)
					// A request made while this probe ran is answered by
					// it: a failure must not be followed by a second
					// early probe that skips the doubled cooldown.
					b.probeNow.Store(0)
				})
			}
		}
		timer.Reset(wait)
	}
}

// changed is the Notifier's call: the Store's state of this key changed
// (another instance wrote it), so Run re-reads it now rather than at the
// next refresh. It never blocks.
func (b *Breaker) changed() {
	select {
	case b.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// ProbeNow asks Run for its recovery probe at once rather than when the
// cooldown runs out: fresh evidence that the backend is back (active health
// checks that all began after the trip, an operator's enable or request)
// makes waiting pointless. The request is for the generation open now: once
// any probe of that generation has ended, here or on another instance
// sharing the Store (a success closes, a failure re-opens, both move the
// generation), it is moot, so N instances asking together make one probe. Nothing else changes: the probe is still single
// flight under the probe lock, it captures the Store's open generation, a
// success closes by compare-and-set and a failure re-opens with the doubled
// cooldown and the alert. A closed or disabled breaker ignores the request.
// It never blocks.
func (b *Breaker) ProbeNow() {
	b.probeNow.Store(b.snap.Load().Generation + 1)
	select {
	case b.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// probe makes one recovery dial if this instance wins the probe lock and the
// Store still says open, not disabled, and cooldown run out, unless early
// and still at the generation the early probe was asked for.
func (b *Breaker) probe(ctx context.Context, early bool, gen uint64) {
	if b.local.Load() != nil {
		b.probeLocal(ctx, early) // open here alone: no fleet lock
		return
	}
	// The lock runs out ProbeLockTTL after it was asked for (give or take
	// the way there), and the probe must end while it holds: the read
	// under the lock (and, with Sentinel or Cluster, the wait for the
	// replica) come out of the same time, or another instance could take
	// the lock and probe the same generation beside this probe.
	lockedBy := time.Now().Add(b.opts.ProbeLockTTL)
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
	nr := b.reads.Add(1)
	st, err := b.store.Read(ctx, b.key)
	if err != nil {
		return
	}
	b.publishRead(st, nr)
	if !st.Open || st.Disabled || (st.CooldownLeft > 0 && !(early && st.Generation == gen)) {
		return
	}
	if !time.Now().Before(lockedBy) {
		return // the lock ran out on the way: a probe now would judge nothing for certain
	}
	a := Attempt{Kind: KindProbe, Generation: st.Generation, LocalGeneration: b.localGen.Load()}
	pctx, cancel := context.WithDeadline(ctx, lockedBy)
	r := b.opts.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		r = Local // shutting down: the result says nothing about the backend
	}
	b.done(a, r, false) // the probe's own goroutine may wait on the Store
}
