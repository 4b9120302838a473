package breaker

import "context"

// A reload replaces every backend's breaker, but connections dialed before
// it still hold the old one and report their results (a connect, an early
// reset, a UDP reply) to it afterwards. With Options.Async the old
// breaker's Run has stopped by then, so the transitions those results ask
// for would wait in a queue nobody reads. HandOver sends them on instead.

// asyncOp is a transition Done decided and Run makes (Options.Async).
type asyncOp struct {
	kind opKind
	a    Attempt
	r    Result // opJudge only
}

type opKind uint8

const (
	opJudge opKind = iota // a result of a newer generation: refresh, then judge
	opTrip
	opClose
)

// apply makes op's transition against the Store, on Run's goroutine.
func (b *Breaker) apply(ctx context.Context, op asyncOp) {
	switch op.kind {
	case opJudge:
		if err := b.Refresh(ctx); err != nil {
			b.log.Warn("breaker result dropped: store unreadable", "error", err)
			call(b.opts.Events.Dropped, b.key)
			return
		}
		b.judge(op.a, op.r, false)
	case opTrip:
		b.trip(ctx, op.a)
	case opClose:
		b.close(ctx, op.a)
	}
}

// HandOver makes next, the breaker that replaces b for the same key at a
// reload, judge from now on every result reported to b, and take the
// transitions b's Run leaves queued when it stops. The Store key is the
// same, so the generation rule holds unchanged: a result is judged against
// the generation next sees, and a dial captured before a trip stays stale.
// Call it once next serves, before b's Run stops. A next of another key, b
// itself, or one handed over to b is ignored.
func (b *Breaker) HandOver(next *Breaker) {
	if next == nil || next.key != b.key {
		return
	}
	for x := next; x != nil; x = x.next.Load() {
		if x == b {
			return
		}
	}
	b.next.Store(next)
}

// current is the breaker that judges results reported to b: b, or the
// last of its successors.
func (b *Breaker) current() *Breaker {
	for n := b.next.Load(); n != nil; n = b.next.Load() {
		b = n
	}
	return b
}

// submit hands a Store transition to Run (Options.Async). It never blocks:
// with the queue full (Run stuck on an unreachable Store) the transition is
// dropped, and the evidence that asked for it asks again. Once Run has
// stopped, it goes to the successor, or is dropped when there is none.
func (b *Breaker) submit(op asyncOp) bool {
	b.opsMu.Lock()
	defer b.opsMu.Unlock()
	if b.stopped {
		if n := b.next.Load(); n != nil {
			return n.submit(op)
		}
		b.log.Warn("breaker transition dropped: its Run has stopped (the backend left the configuration)")
		call(b.opts.Events.Dropped, b.key)
		return false
	}
	select {
	case b.ops <- op:
		return true
	default:
		b.log.Warn("breaker transition dropped: the store is not keeping up")
		call(b.opts.Events.Dropped, b.key)
		return false
	}
}

// start and stop bracket Run: while stopped, submit queues nothing.
func (b *Breaker) start() {
	b.opsMu.Lock()
	b.stopped = false
	b.opsMu.Unlock()
}

// stop marks Run stopped and passes left, and what is still queued, to
// the successor; with none, those transitions are dropped and counted.
func (b *Breaker) stop(left []asyncOp) {
	b.opsMu.Lock()
	b.stopped = true
	for len(b.ops) > 0 {
		left = append(left, <-b.ops)
	}
	b.opsMu.Unlock()
	for _, op := range left {
		if op.kind == opTrip {
			b.tripQueued.CompareAndSwap(op.a.Generation+1, 0) // no longer queued here
		}
		b.submit(op) // stopped: on to the successor, or counted
	}
}
