package pick

import (
	"sync"

	"github.com/l4lb/l4lb/pkg/hashring"
)

// usableSet keeps, for a hashing picker, a hashring.Mask holding the
// usable backends, so that its walks step only on their positions. With
// State alone a walk must ask about the unusable backends one by one: in a
// pool of 4,000 with all but 3 down a pick met thousands of them. With the
// mask it meets only usable backends, so a pick costs about what it
// returns whatever the pool's size.
//
// The mask learns of changes like loadTotals: from Changed (see Notified)
// and by polling pollsFor backends per pick, round robin. The walks still
// ask State about every backend the mask lets them meet, so a backend
// wrongly in the mask is merely skipped; one wrongly out of it (back up,
// not yet re-read) is passed over until the next pick that drains the
// notice, or, unnotified, until polling reaches it (len/pollBudget picks).
// Pools of up to pollBudget backends keep no mask: their walks ask State
// about every backend, exactly as before, at a cost bounded by their size.
//
// Only the goroutine holding mu writes the mask (TryLock: a pick that finds
// it taken leaves the work to the holder and walks the mask as it is), so
// readers are lock-free.
type usableSet struct {
	c       *common
	mask    *hashring.Mask // nil in small pools
	changes changes
	mu      sync.Mutex
	cursor  int
	polls   int
}

// newUsableSet builds the mask (over the picker's structure, every node
// in) unless the pool is small, and fills it from State.
func newUsableSet(c *common, build func() *hashring.Mask, notified bool) *usableSet {
	n := len(c.weights)
	if n <= pollBudget {
		return &usableSet{c: c}
	}
	u := &usableSet{c: c, mask: build(), changes: newChanges(n), polls: pollsFor(n, notified)}
	for i := range n {
		u.refresh(i)
	}
	return u
}

// Changed queues i to be re-read by the next pick.
func (u *usableSet) Changed(i int) {
	if u.mask != nil {
		u.changes.Changed(i)
	}
}

// absorb takes in the queued notices and polls a few backends, unless
// another pick is doing so.
func (u *usableSet) absorb() {
	if u.mask == nil || !u.mu.TryLock() {
		return
	}
	u.changes.drain(u.refresh)
	for range u.polls {
		u.refresh(u.cursor)
		if u.cursor++; u.cursor == len(u.c.weights) {
			u.cursor = 0
		}
	}
	u.mu.Unlock()
}

// refresh re-reads i's usability into the mask (weight-0 backends occur
// in no structure, so the mask ignores them).
func (u *usableSet) refresh(i int) { u.mask.Set(i, u.c.st.Usable(i)) }
