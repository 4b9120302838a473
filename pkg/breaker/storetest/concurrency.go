package storetest

import (
	"fmt"
	"sync"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// racers is how many goroutines race one transition.
const racers = 8

// result is one racer's answer.
type result struct {
	st  breaker.State
	ok  bool
	err error
}

// race runs call from racers goroutines released at once and returns their
// answers, indexed by racer.
func race(call func(i int) result) []result {
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		out   = make([]result, racers)
	)
	for i := range racers {
		wg.Go(func() {
			<-start
			out[i] = call(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// winners fails the test on a racer's error and returns how many racers
// made the transition.
func (e *env) winners(what string, rs []result) int {
	e.t.Helper()
	n := 0
	for i, r := range rs {
		if r.err != nil {
			e.t.Fatalf("%s: racer %d: %v", what, i, r.err)
		}
		if r.ok {
			n++
		}
	}
	return n
}

// checkAll checks every racer's returned state: the winner's is the state
// it made, and a loser can only have lost to it, so its state is the same.
func (e *env) checkAll(what string, rs []result, w want) {
	e.t.Helper()
	for i, r := range rs {
		e.check(fmt.Sprintf("%s: racer %d", what, i), r.st, w)
	}
}

// testConcurrentTripAndClose: racers race Trip at the same seen, then Close
// at the same generation; each time exactly one wins. Several rounds.
func testConcurrentTripAndClose(e *env) {
	k := e.key("k")
	for round := range uint64(10) {
		seen := 2 * round
		rs := race(func(int) result {
			st, ok, err := e.s.Trip(e.ctx, k, seen, tripCooldown, tripTTL)
			return result{st, ok, err}
		})
		what := fmt.Sprintf("round %d: %d racing Trip(seen %d)", round, racers, seen)
		if n := e.winners(what, rs); n != 1 {
			e.t.Fatalf("%s: %d made the transition, want exactly 1", what, n)
		}
		e.checkAll(what, rs, openAt(seen+1, tripCooldown, tripTTL))

		rs = race(func(int) result {
			st, ok, err := e.s.Close(e.ctx, k, seen+1)
			return result{st, ok, err}
		})
		what = fmt.Sprintf("round %d: %d racing Close(gen %d)", round, racers, seen+1)
		if n := e.winners(what, rs); n != 1 {
			e.t.Fatalf("%s: %d made the transition, want exactly 1", what, n)
		}
		e.checkAll(what, rs, closedAt(seen+2))
		e.checkRead(what, k, closedAt(seen+2))
	}
}

// testConcurrentCloseAndReopen: racers race Close and Reopen of the same
// open generation (a probe's success against another instance's failed
// probe): exactly one of all of them wins, and the state is its.
func testConcurrentCloseAndReopen(e *env) {
	k := e.key("k")
	var gen uint64
	for round := range 10 {
		e.mustTrip(k, gen, tripCooldown, tripTTL)
		gen++
		at := gen
		rs := race(func(i int) result {
			if i%2 == 0 {
				st, ok, err := e.s.Close(e.ctx, k, at)
				return result{st, ok, err}
			}
			st, ok, err := e.s.Reopen(e.ctx, k, at, reopenCooldown, reopenTTL)
			return result{st, ok, err}
		})
		what := fmt.Sprintf("round %d: %d racing Close and Reopen(gen %d)", round, racers, at)
		if n := e.winners(what, rs); n != 1 {
			e.t.Fatalf("%s: %d made a transition, want exactly 1", what, n)
		}
		gen++
		w := closedAt(gen)
		for i, r := range rs {
			if r.ok && i%2 == 1 {
				w = openAt(gen, reopenCooldown, reopenTTL)
			}
		}
		e.checkAll(what, rs, w)
		e.checkRead(what, k, w)
		if w.Open {
			if _, ok := e.close(k, gen); !ok {
				e.t.Fatalf("%s: Close(gen %d) refused", what, gen)
			}
			gen++
		}
	}
}

// testConcurrentProbeAcquire: racers with distinct owners race for a free
// probe lock; exactly one gets it.
func testConcurrentProbeAcquire(e *env) {
	k := e.key("k")
	for round := range 10 {
		rs := race(func(i int) result {
			got, err := e.s.AcquireProbe(e.ctx, k, fmt.Sprintf("owner-%d", i), longTTL)
			return result{ok: got, err: err}
		})
		what := fmt.Sprintf("round %d: %d racing AcquireProbe", round, racers)
		if n := e.winners(what, rs); n != 1 {
			e.t.Fatalf("%s: %d got the lock, want exactly 1", what, n)
		}
		for i, r := range rs {
			if r.ok {
				e.release(k, fmt.Sprintf("owner-%d", i))
			}
		}
	}
}
