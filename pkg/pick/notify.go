package pick

import (
	"sync"
	"sync/atomic"
)

// Notified is implemented by the pickers that keep backends in a load- or
// weight-ordered structure instead of scanning the pool on every pick:
// least-conn, weighted-round-robin, consistent-hash with a hash balance
// factor, and the hashing pickers (ip-hash, consistent-hash, maglev) for
// their masks of usable backends. Changed(i) tells the picker that backend
// i's Active count, its usability or its UsableSince may have changed.
//
// A pool that calls Changed for every such change (and says so with
// Config.Notified) gets exact answers at a cost independent of the pool's
// size. The hook is optional: a picker that is never told polls a bounded
// number of backends per pick (all of them in pools of up to pollBudget
// backends, so small pools get exactly today's answers), and it re-reads the
// live State of every backend it is about to return, so it never returns a
// backend that is unusable now and never trusts a stale load for the winner.
//
// Changed is safe for concurrent use, never blocks on a pick in progress
// beyond a short queue lock, never calls back into State (so a State may
// call it from inside Usable), and ignores indices out of range. It costs an
// atomic swap when i is already queued.
type Notified interface {
	Changed(i int)
}

// pollBudget is how many backends a picker that is not notified re-reads
// per pick, round robin over the pool; pools no larger than this are
// re-read whole on every pick. A notified picker still re-reads one per
// pick, which catches a change the pool missed (for example between
// building a picker and publishing it).
const pollBudget = 16

// rampPolls is how many backends in their slow-start ramp a picker
// re-weighs per pick, round robin over those ramping (their effective
// weight grows with time, which no event announces).
const rampPolls = 4

func pollsFor(n int, notified bool) int {
	if notified {
		return 1
	}
	return min(n, pollBudget)
}

// changes is the queue behind Changed: a flag per backend so that each is
// queued at most once, and two buffers of capacity n swapped by the single
// consumer, so neither side allocates.
type changes struct {
	dirty []atomic.Bool
	any   atomic.Bool // set after every append; a drain that finds it clear has nothing to do
	mu    sync.Mutex
	queue []int32
	spare []int32
}

func newChanges(n int) changes {
	return changes{dirty: make([]atomic.Bool, n), queue: make([]int32, 0, n), spare: make([]int32, 0, n)}
}

// Changed queues i for the next pick.
func (c *changes) Changed(i int) {
	if i < 0 || i >= len(c.dirty) || c.dirty[i].Load() || c.dirty[i].Swap(true) {
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, int32(i))
	c.mu.Unlock()
	c.any.Store(true)
}

// drain calls f for every backend queued since the last drain. Only one
// goroutine may drain at a time (the picker's lock, or a TryLock, ensures
// it). A backend changed again while f runs is queued again.
func (c *changes) drain(f func(i int)) {
	// An append made before this load is in the batch below; one made
	// after it sets any again for the next drain.
	if !c.any.Load() {
		return
	}
	c.any.Store(false)
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.mu.Unlock()
		return
	}
	// The producers get the batch of the previous drain, done with since
	// (drains do not overlap); this one is theirs at the next.
	batch := c.queue
	c.queue = c.spare[:0]
	c.spare = batch
	c.mu.Unlock()
	for _, i := range batch {
		c.dirty[i].Store(false)
		f(int(i))
	}
}

// rampSet lists the backends seen in their slow-start ramp, with O(1) add
// and remove, for the picker to re-weigh a few of them per pick.
type rampSet struct {
	list   []int32
	at     []int32 // at[i]: i's position in list, -1 when absent
	cursor int
}

func newRampSet(n int) rampSet {
	r := rampSet{list: make([]int32, 0, n), at: make([]int32, n)}
	for i := range r.at {
		r.at[i] = -1
	}
	return r
}

// set records whether i is ramping.
func (r *rampSet) set(i int, ramping bool) {
	switch k := r.at[i]; {
	case ramping && k < 0:
		r.at[i] = int32(len(r.list))
		r.list = append(r.list, int32(i))
	case !ramping && k >= 0:
		last := r.list[len(r.list)-1]
		r.list[k] = last
		r.at[last] = k
		r.list = r.list[:len(r.list)-1]
		r.at[i] = -1
	}
}

// take returns the next ramping backend, round robin, or -1 when none is.
func (r *rampSet) take() int {
	if len(r.list) == 0 {
		return -1
	}
	if r.cursor >= len(r.list) {
		r.cursor = 0
	}
	i := r.list[r.cursor]
	r.cursor++
	return int(i)
}

// fullWeight is i's configured weight in effective-weight units.
func (c *common) fullWeight(i int) int64 { return int64(c.weights[i]) * weightScale }
