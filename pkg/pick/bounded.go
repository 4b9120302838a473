package pick

import (
	"sync"
	"sync/atomic"
)

// loadTotals keeps, for consistent hashing with bounded loads, the sum of
// Active and the sum of weights over the usable weighted backends, which
// the capacity of every backend depends on. Instead of summing the pool on
// every pick it keeps each backend's last counted contribution and moves
// the totals by the difference whenever it re-reads a backend: on Changed,
// by polling (see Notified), and for every backend a pick looks at.
//
// It is lock-free: contributions are swapped atomically and the totals
// moved by exactly what each swap replaced, so they always converge to the
// sum of the contributions, whichever goroutines re-read what. Only the
// queue of notifications has a single consumer, taken with TryLock (a pick
// that finds another draining leaves it the work).
type loadTotals struct {
	c       *common
	changes changes
	drainMu sync.Mutex
	active  []atomic.Int64 // counted Active (0 when not usable)
	weight  []atomic.Int64 // counted weight (0 when not usable)
	total   atomic.Int64
	totalW  atomic.Int64
	cursor  atomic.Uint64
	polls   int
}

func newLoadTotals(c *common, notified bool) *loadTotals {
	n := len(c.weights)
	t := &loadTotals{
		c:       c,
		changes: newChanges(n),
		active:  make([]atomic.Int64, n),
		weight:  make([]atomic.Int64, n),
		polls:   pollsFor(n, notified),
	}
	for i := range n {
		t.refresh(i)
	}
	return t
}

// refresh re-reads i's usability and load.
func (t *loadTotals) refresh(i int) {
	if t.c.weights[i] == 0 {
		return
	}
	u := t.c.st.Usable(i)
	var a int64
	if u {
		a = t.c.st.Active(i)
	}
	t.count(i, u, a)
}

// count records i's usability and load as just read.
func (t *loadTotals) count(i int, usable bool, active int64) {
	var w int64
	if !usable {
		active = 0
	} else {
		w = int64(t.c.weights[i])
	}
	if t.active[i].Load() != active {
		if old := t.active[i].Swap(active); old != active {
			t.total.Add(active - old)
		}
	}
	if t.weight[i].Load() != w {
		if old := t.weight[i].Swap(w); old != w {
			t.totalW.Add(w - old)
		}
	}
}

// absorb takes in the queued notifications and polls a few backends.
func (t *loadTotals) absorb() {
	if t.drainMu.TryLock() {
		t.changes.drain(t.refresh)
		t.drainMu.Unlock()
	}
	n := uint64(len(t.c.weights))
	start := t.cursor.Add(uint64(t.polls)) - uint64(t.polls)
	for k := range uint64(t.polls) {
		t.refresh(int((start + k) % n))
	}
}

// totals returns the sum of Active and of weights over the usable weighted
// backends, as last counted.
func (t *loadTotals) totals() (active int64, weight int) {
	return max(t.total.Load(), 0), int(max(t.totalW.Load(), 0))
}
