package breaker

import (
	"context"
	"time"
)

// A fleet may take a backend out for all only when enough instances trip
// it ([cluster] trip_quorum, docs/breaker.md "Trip quorum"): one instance
// whose own path to a backend is broken must not take it from the others.
// Its Store then implements Quorum, and a trip below the quorum is this
// instance's vote: its breaker opens here alone (a local open), so its own
// dials stay protected, while the Store's state, and every other
// instance's, stay closed.
//
// A local open follows the rules of an open one with this instance's own
// local generation in place of the Store's generation:
//
//   - Every local transition (a local trip, close or re-open) raises the
//     local generation, which each dial captures beside the Store's
//     (Attempt.LocalGeneration). A result whose local generation is not
//     the current one is stale: a dial begun before a local trip never
//     closes it (rule 2).
//   - After its cooldown the instance probes the backend itself, one probe
//     at a time in this process, with no fleet lock: the fleet's single
//     probe is for an open the fleet shares. Successes of probes and
//     force-tries of the current local generation close it (Successes of
//     them, rule 3), and the instance withdraws its vote; a failed probe
//     re-opens it with the doubled cooldown and the alert (rule 4), and
//     votes again, which may make the quorum.
//   - Once the snapshot shows the breaker open in the Store (the quorum was
//     reached, by this vote or another), the local open is over: the
//     instance follows the fleet's open, its single probe and its close.
//   - The failure window starts empty at every local transition, as at a
//     Store transition.
//
// While the Store cannot count votes (a fleet apart from Redis), Vote
// answers voted without recording anything: the instance protects itself
// and leaves the others alone.

// Quorum is implemented by a Store that opens a breaker for every instance
// only when enough of them have tripped it within the failure window.
type Quorum interface {
	// Vote is Trip with a quorum: if the breaker is closed at generation
	// seen, it records this instance's trip of key for window and opens
	// the breaker as Trip would (tripped) once enough instances' trips lie
	// within window. Below the quorum it opens nothing and answers voted:
	// the breaker opens on this instance alone. Neither: the breaker was
	// open already, or the generation moved (the state after the call says
	// which).
	Vote(ctx context.Context, key string, seen uint64, cooldown, ttl, window time.Duration) (st State, tripped, voted bool, err error)
	// Unvote withdraws this instance's vote on key: its local open closed.
	Unvote(ctx context.Context, key string) error
}

// localOpen is an open of this instance alone. It never changes once made:
// a transition replaces it.
type localOpen struct {
	gen      uint64        // the local generation it opened at
	cooldown time.Duration // nominal; each failed local probe doubles it
	until    time.Time     // local clock: when its probe is due
}

// tripStore is the Store's half of a trip: a vote where the Store counts
// votes, Trip elsewhere.
func (b *Breaker) tripStore(ctx context.Context, seen uint64) (st State, tripped, voted bool, err error) {
	if q, ok := b.store.(Quorum); ok {
		return q.Vote(ctx, b.key, seen, b.cfg.Cooldown, b.cfg.Cooldown, b.cfg.Window)
	}
	st, tripped, err = b.store.Trip(ctx, b.key, seen, b.cfg.Cooldown, b.cfg.Cooldown)
	return st, tripped, false, err
}

// openLocal opens the breaker on this instance alone: the Store took a's
// trip as this instance's vote, below the quorum.
func (b *Breaker) openLocal(a Attempt) {
	b.mu.Lock()
	s := b.snap.Load()
	if b.local.Load() != nil || a.LocalGeneration != b.localGen.Load() || s.Open || s.Generation != a.Generation {
		b.mu.Unlock()
		return // opened already, or overtaken by a transition
	}
	gen := b.localGen.Add(1)
	b.local.Store(&localOpen{gen: gen, cooldown: b.cfg.Cooldown, until: b.opts.Clock.Now().Add(b.cfg.Cooldown)})
	b.win.restart()
	b.mu.Unlock()
	st := b.State()
	callState(b.opts.Events.Changed, b.key, st)
	callState(b.opts.Events.Trip, b.key, st)
	b.log.Info("breaker tripped on this instance only: below the fleet's trip quorum",
		"generation", st.Generation, "local_generation", gen, "cooldown", st.Cooldown)
}

// closeLocal is rule 3 for a local open: a's success closes it if a
// captured its local generation. The vote is withdrawn first, so that no
// quorum counts it once this instance dials the backend again.
func (b *Breaker) closeLocal(ctx context.Context, a Attempt) {
	if lo := b.local.Load(); lo == nil || lo.gen != a.LocalGeneration {
		b.stale(a, Success, b.snap.Load().Generation)
		return
	}
	if q, ok := b.store.(Quorum); ok {
		if err := q.Unvote(ctx, b.key); err != nil {
			b.log.Warn("breaker vote not withdrawn; it ages out of the window", "error", err)
		}
	}
	b.mu.Lock()
	lo := b.local.Load()
	if lo == nil || lo.gen != a.LocalGeneration {
		b.mu.Unlock()
		b.stale(a, Success, b.snap.Load().Generation)
		return
	}
	b.localGen.Add(1)
	b.local.Store(nil)
	b.win.restart()
	b.mu.Unlock()
	st := b.State()
	callState(b.opts.Events.Changed, b.key, st)
	callState(b.opts.Events.Close, b.key, st)
	b.log.Info("breaker closed on this instance (it was open here alone)", "kind", a.Kind.String(),
		"generation", st.Generation, "local_generation", b.localGen.Load())
}

// reopenLocal is rule 4 for a local open: a failed probe of its local
// generation re-opens it with the doubled cooldown and the alert, and
// votes again: this instance's fresh evidence may make the quorum, and the
// fleet then opens as at any trip.
func (b *Breaker) reopenLocal(a Attempt) {
	lo := b.local.Load()
	if lo == nil || lo.gen != a.LocalGeneration {
		b.stale(a, Failure, b.snap.Load().Generation)
		return
	}
	next := min(max(2*lo.cooldown, b.cfg.Cooldown), b.cfg.MaxCooldown)
	jitter := 0.9 + 0.2*b.opts.Rand() // ±10%
	ttl := min(time.Duration(float64(next)*jitter), b.cfg.MaxCooldown)
	ctx, cancel := b.storeCtx()
	nr := b.reads.Add(1)
	st, tripped, _, err := b.tripStore(ctx, b.snap.Load().Generation)
	cancel()
	if err != nil {
		b.log.Warn("breaker vote not recorded", "error", err)
	} else {
		b.publishRead(st, nr)
	}
	call(b.opts.Events.ProbeFailure, b.key)
	if tripped {
		callState(b.opts.Events.Trip, b.key, st)
		b.log.Warn("breaker probe failed: backend still down; the trip quorum is reached, open for the fleet",
			"generation", st.Generation, "cooldown", st.Cooldown)
		return
	}
	b.mu.Lock()
	if b.local.Load() != lo {
		b.mu.Unlock()
		return // the fleet opened meanwhile: its open is the one now
	}
	gen := b.localGen.Add(1)
	b.local.Store(&localOpen{gen: gen, cooldown: next, until: b.opts.Clock.Now().Add(ttl)})
	b.mu.Unlock()
	rs := b.State()
	callState(b.opts.Events.Changed, b.key, rs)
	callState(b.opts.Events.Reopen, b.key, rs)
	b.log.Warn("breaker probe failed: backend still down from this instance, re-opened here alone",
		"generation", rs.Generation, "local_generation", gen, "cooldown", next, "cooldown_left", ttl)
}

// joinFleet ends the local open once the snapshot shows the breaker open
// in the Store: from then the fleet's open, probe and close are this
// instance's too. publishRead calls it with the Open state it installed.
// It takes mu even when there is no local open to end: an openLocal that
// read the snapshot closed just before it turned open may be about to
// make one, and must not leave it beside the fleet's open (its probe would
// wait for a close that is the fleet's, and it would outlive that close).
func (b *Breaker) joinFleet(st State) {
	b.mu.Lock()
	lo := b.local.Swap(nil)
	b.mu.Unlock()
	if lo != nil {
		b.log.Info("breaker open for the fleet now: this instance's own open joins it",
			"generation", st.Generation, "local_generation", lo.gen)
	}
}

// probeLocal is Run's probe of a local open: once its cooldown has run out
// (or early, asked by ProbeNow), one dial at its local generation. It
// re-reads the Store first: an open the fleet made meanwhile ends the
// local one, and its probe is the fleet's.
func (b *Breaker) probeLocal(ctx context.Context, early bool) {
	if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
		b.log.Warn("breaker snapshot refresh failed", "error", err)
	}
	s, lo := b.snap.Load(), b.local.Load()
	if lo == nil || s.Open || s.Disabled || (lo.until.After(b.opts.Clock.Now()) && !early) {
		return
	}
	a := Attempt{Kind: KindProbe, Generation: s.Generation, LocalGeneration: lo.gen}
	pctx, cancel := context.WithTimeout(ctx, b.opts.ProbeLockTTL)
	r := b.opts.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		r = Local // shutting down: the result says nothing about the backend
	}
	b.done(a, r, false)
}
