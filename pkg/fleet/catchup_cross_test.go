package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// catchUp holds no lock across its Redis calls (catchup_lock_test.go), so
// two merges of one key can cross: one made on a local copy read before
// the other's merge, and before an operator's Enable answered after it.
// Such a merge must change nothing, or it writes the copy's disable back
// to the whole fleet and undoes the Enable. These were found in review.

// stateAt is a closed breaker state at gen, disabled or not.
func stateAt(gen uint64, disabled bool) (st breaker.State) {
	st.Generation, st.Disabled = gen, disabled
	return st
}

// A catch-up's merge crossing another one (another instance's, made on the
// same copy of the fleet's state before the loss) with an Enable between:
// it finds Redis no longer behind and changes nothing, the disable
// included.
func TestCatchUpMergeCrossingAnotherLeavesTheEnable(t *testing.T) {
	h := newFleet(t)
	s := h.store(nil, Options{})
	r := s.remote.Load()
	ctx := context.Background()
	const key = "web/10.0.6.9:80"
	stale := stateAt(7, true) // what both copies hold; Redis lost it (at 0)
	if _, changed, err := r.merge(ctx, key, stale, mergeBehind); err != nil || !changed {
		t.Fatalf("first merge: changed %v, %v", changed, err)
	}
	if err := r.Enable(ctx, key); err != nil { // the operator's enable, answered 200
		t.Fatal(err)
	}
	st, changed, err := r.merge(ctx, key, stale, mergeBehind) // the crossed merge
	if err != nil {
		t.Fatal(err)
	}
	if changed || st.Disabled || h.raw(key).Disabled {
		t.Fatalf("the crossed merge changed Redis (%v): %+v, the enable undone", changed, st)
	}
}

// Two catch-ups of one key on one instance: the second, begun while the
// first is between its read and its merge, makes no Redis call and
// answers what it was given (made, its merge would be on a copy read
// before the first's, and could write a disable back over an Enable that
// followed). After the first's merge and an operator's Enable, the next
// catch-up leaves the backend enabled.
func TestCatchUpOfAKeyRunsOnceAtATime(t *testing.T) {
	h := newFleet(t)
	ops := newOpCounter()
	held, release := make(chan struct{}), make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let)       // before the harness waits for the held catch-up
	var hold atomic.Bool // the next "read" answered waits for release
	s := h.store(nil, Options{Observe: func(op string, took time.Duration, err error) {
		ops.observe(op, took, err)
		if op == "read" && hold.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
	}})
	ctx := context.Background()
	const key = "web/10.0.6.9:80"
	s.local.Mirror(key, stateAt(7, true)) // Redis lost it: at 0, enabled

	hold.Store(true)
	first := make(chan bool, 1)
	h.goRun(h.ctx, func(ctx context.Context) {
		_, lost := s.catchUp(ctx, key, breaker.State{})
		first <- lost
	})
	<-held // the first read Redis (at 0) and waits before its merge
	reads, merges := ops.n("read"), ops.n("merge")
	st, lost := s.catchUp(ctx, key, breaker.State{})
	if lost || st.Generation != 0 || ops.n("read") != reads || ops.n("merge") != merges {
		t.Fatalf("a second catch-up while one is under way: %+v lost %v, %d reads and %d merges made; want what it was given, no call",
			st, lost, ops.n("read")-reads, ops.n("merge")-merges)
	}
	let()
	if !<-first {
		t.Fatal("the first catch-up did not find Redis behind")
	}
	if raw := h.raw(key); !raw.Disabled || raw.Gen != 8 {
		t.Fatalf("redis holds %+v after the first merge, want the copy's disable at generation 8", raw)
	}
	if err := s.Enable(ctx, key); err != nil { // the operator's enable, answered 200
		t.Fatal(err)
	}
	s.catchUp(ctx, key, breaker.State{}) // the second, made again on what it had
	if raw := h.raw(key); raw.Disabled {
		t.Fatalf("redis holds %+v: the enable was undone", raw)
	}
	if local, _ := s.local.Read(ctx, key); local.Disabled {
		t.Fatalf("the local copy %+v: the enable was undone here", local)
	}
}
