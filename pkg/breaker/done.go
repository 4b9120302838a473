package breaker

import (
	"context"
	"log/slog"
	"time"
)

// Done applies the rules to the result of a dial that captured a. It never
// blocks on anything but Store calls at transitions (trip, close, re-open).
//
// Outcomes (current generation g; docs/breaker.md, "Outcomes at a glance"):
//   - a.Generation < g, or a local generation other than the current one
//     (quorum.go): stale, ignored, counted (Events.Stale).
//   - closed, g: a client failure goes into the window and may trip; a
//     success does nothing (it does not clear the window); a force-try (the
//     backend was only health-down) is counted only, either way.
//   - open, g, probe or force-try: a success counts towards Successes and
//     then closes by compare-and-delete; a failed probe re-opens with a
//     doubled cooldown and raises the alert; a failed force-try is counted
//     only.
//   - open, g, client: the dial raced the trip (Allow said yes just before
//     it); it is no post-trip evidence and is ignored.
//   - open on this instance alone (below the trip quorum): the open rows,
//     with the local generation (quorum.go).
//
// With Options.Async the Store calls are made by Run instead, so Done never
// waits on anything. Once b is handed over (HandOver), its successor judges.
func (b *Breaker) Done(a Attempt, r Result) {
	b = b.current()
	b.done(a, r, b.opts.Async)
}

// done is Done with the choice of making Store calls here (async false: the
// caller may wait) or handing them to Run.
func (b *Breaker) done(a Attempt, r Result, async bool) {
	if f := b.opts.Events.Dial; f != nil {
		f(b.key, a.Kind, r)
	}
	if r == Local {
		return
	}
	b.judge(a, r, async)
}

func (b *Breaker) judge(a Attempt, r Result, async bool) {
	s := b.snap.Load()
	if a.Generation > s.Generation {
		// Only possible when the attempt came from a fresher view than
		// ours; catch up before judging it.
		if async {
			b.submit(asyncOp{kind: opJudge, a: a, r: r})
			return
		}
		ctx, cancel := b.storeCtx()
		err := b.Refresh(ctx)
		cancel()
		if err != nil {
			b.log.Warn("breaker result dropped: store unreadable", "error", err)
			return
		}
		s = b.snap.Load()
	}
	if a.Generation < s.Generation || a.LocalGeneration != b.localGen.Load() {
		// Begun before a transition of the Store's or of this
		// instance's own (quorum.go).
		b.stale(a, r, s.Generation)
		return
	}
	// Open on this instance alone (quorum.go): the open rows, at the local
	// generation.
	local := !s.Open && b.local.Load() != nil
	if !s.Open && !local {
		if a.Kind == KindForce {
			// Rule 6: a force-try is made at a backend the client could
			// not otherwise reach (here: health-down, breaker closed). Its
			// failure is counted by Events.Dial only; feeding the window
			// would let all-down clients trip a breaker the rules never
			// asked to trip.
			b.debug("force-try result at a closed generation: counted only", a, r)
			return
		}
		b.closedResult(a, r, async)
		return
	}
	switch {
	case a.Kind == KindClient:
		b.debug("client result of an open generation ignored", a, r)
	case r == Success:
		b.recover(a, async)
	case a.Kind == KindProbe && local:
		b.reopenLocal(a)
	case a.Kind == KindProbe:
		b.reopen(a, s.Cooldown)
	default: // failed force-try: counted by Events.Dial only (rule 6)
		b.debug("force-try failed", a, r)
	}
}

func (b *Breaker) stale(a Attempt, r Result, current uint64) {
	call(b.opts.Events.Stale, b.key)
	if b.log.Enabled(context.Background(), slog.LevelDebug) {
		b.log.Debug("breaker stale result ignored", "kind", a.Kind.String(), "result", r.String(),
			"generation", a.Generation, "current_generation", current)
	}
}

func (b *Breaker) debug(msg string, a Attempt, r Result) {
	if b.log.Enabled(context.Background(), slog.LevelDebug) {
		b.log.Debug(msg, "kind", a.Kind.String(), "result", r.String(), "generation", a.Generation)
	}
}

// closedResult is rule 1.
func (b *Breaker) closedResult(a Attempt, r Result, async bool) {
	if r == Success && b.cfg.MinRatio <= 0 {
		return // nothing to record: successes never clear the window
	}
	now := b.opts.Clock.Now()
	b.mu.Lock()
	b.win.add(a.Generation, now, r == Failure)
	trip := r == Failure && b.win.shouldTrip(b.cfg, now)
	b.mu.Unlock()
	if !trip {
		return
	}
	if async {
		// One trip per generation waits for Run; the failures that follow
		// it while it waits have nothing to add.
		if b.tripQueued.Swap(a.Generation+1) == a.Generation+1 {
			return
		}
		if !b.submit(asyncOp{kind: opTrip, a: a}) {
			b.tripQueued.Store(0)
		}
		return
	}
	ctx, cancel := b.storeCtx()
	defer cancel()
	b.trip(ctx, a)
}

// trip is rule 1's transition: open, if the Store is still at the
// generation the failures were counted in.
func (b *Breaker) trip(ctx context.Context, a Attempt) {
	defer b.tripQueued.CompareAndSwap(a.Generation+1, 0)
	nr := b.reads.Add(1)
	st, ok, voted, err := b.tripStore(ctx, a.Generation)
	if err != nil {
		b.log.Error("breaker trip not recorded", "error", err)
		return
	}
	b.publishRead(st, nr)
	if voted {
		b.openLocal(a)
		return
	}
	if !ok {
		return // another goroutine or instance made the transition first
	}
	callState(b.opts.Events.Trip, b.key, st)
	b.log.Info("breaker tripped", "generation", st.Generation, "cooldown", st.Cooldown)
}

// recover is rule 3: a post-trip success of the current Open generation.
func (b *Breaker) recover(a Attempt, async bool) {
	b.mu.Lock()
	if b.recovery.gen != a.Generation || b.recovery.localGen != a.LocalGeneration {
		b.recovery.gen, b.recovery.localGen, b.recovery.successes = a.Generation, a.LocalGeneration, 0
	}
	b.recovery.successes++
	n := b.recovery.successes
	b.mu.Unlock()
	if n < b.cfg.Successes {
		b.log.Info("breaker recovery success", "kind", a.Kind.String(), "generation", a.Generation,
			"successes", n, "needed", b.cfg.Successes)
		return
	}
	if async {
		b.submit(asyncOp{kind: opClose, a: a})
		return
	}
	ctx, cancel := b.storeCtx()
	defer cancel()
	b.close(ctx, a)
}

// close is rule 3's transition: the compare-and-delete in the Store.
func (b *Breaker) close(ctx context.Context, a Attempt) {
	if b.local.Load() != nil && !b.snap.Load().Open {
		b.closeLocal(ctx, a)
		return
	}
	// The decision is made against the Store, never the snapshot: if the
	// generation moved (another instance re-opened or closed), no close.
	nr := b.reads.Add(1)
	st, ok, err := b.store.Close(ctx, b.key, a.Generation)
	if err != nil {
		b.log.Error("breaker close not recorded", "error", err)
		return
	}
	b.publishRead(st, nr)
	if !ok {
		b.stale(a, Success, st.Generation)
		return
	}
	callState(b.opts.Events.Close, b.key, st)
	b.log.Info("breaker closed", "kind", a.Kind.String(), "generation", st.Generation)
}

// reopen is rule 4: a failed probe of the current Open generation.
func (b *Breaker) reopen(a Attempt, prev time.Duration) {
	next := min(max(2*prev, b.cfg.Cooldown), b.cfg.MaxCooldown)
	jitter := 0.9 + 0.2*b.opts.Rand() // ±10%
	ttl := min(time.Duration(float64(next)*jitter), b.cfg.MaxCooldown)
	ctx, cancel := b.storeCtx()
	defer cancel()
	nr := b.reads.Add(1)
	st, ok, err := b.store.Reopen(ctx, b.key, a.Generation, next, ttl)
	if err != nil {
		b.log.Error("breaker re-open not recorded", "error", err)
		return
	}
	b.publishRead(st, nr)
	if !ok {
		b.stale(a, Failure, st.Generation)
		return
	}
	callState(b.opts.Events.Reopen, b.key, st)
	call(b.opts.Events.ProbeFailure, b.key)
	b.log.Warn("breaker probe failed: backend still down, re-opened",
		"generation", st.Generation, "cooldown", next, "cooldown_left", ttl)
}
