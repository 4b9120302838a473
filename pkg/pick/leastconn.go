package pick

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// leastConn picks the usable backend with the fewest active connections per
// unit of effective weight, comparing (active+1)/weight so that between idle
// backends the heavier one wins. Fallbacks are the next best, by the same
// rule. Equal backends share evenly: the one chosen goes behind the others
// of its load, so ties rotate (as in HAProxy's leastconn tree, where a
// server is requeued after its equals).
//
// Backends live in a binary min-heap ordered by their last known
// (active+1)/weight, then by when they were last requeued; backends found
// unusable are parked outside it. The heap learns of changes from Changed
// (see Notified), from polling a few backends per pick, and from re-reading
// the live state of every backend that comes to its top: a backend whose
// load or weight moved is requeued and the top looked at again, one found
// unusable is parked, so the winner is always judged by its live state. A
// pick costs O(log n) plus the changes it absorbs.
type leastConn struct {
	common
	changes
	mu      sync.Mutex
	heap    []int32  // backends believed usable, min at 0
	pos     []int32  // pos[i]: i's index in heap; -1 when parked (or weight 0)
	load    []int64  // last known Active+1
	weight  []int64  // last known effective weight
	seq     []uint64 // when last requeued: ties go to the earliest
	nextSeq uint64
	ramp    rampSet
	polls   int
	cursor  int
}

func newLeastConn(c common, notified bool) *leastConn {
	n := len(c.weights)
	p := &leastConn{
		common:  c,
		changes: newChanges(n),
		heap:    make([]int32, 0, n),
		pos:     make([]int32, n),
		load:    make([]int64, n),
		weight:  make([]int64, n),
		seq:     make([]uint64, n),
		polls:   pollsFor(n, notified),
	}
	if c.slowStart > 0 {
		p.ramp = newRampSet(n)
	}
	now := p.clock()
	for i := range n {
		p.pos[i] = -1
		if p.weights[i] == 0 {
			continue
		}
		p.load[i], p.weight[i] = p.st.Active(i)+1, p.effectiveWeight(i, now)
		p.seq[i] = p.nextSeq
		p.nextSeq++
		p.noteRamp(i)
		if p.st.Usable(i) {
			p.pos[i] = int32(len(p.heap))
			p.heap = append(p.heap, int32(i))
		}
	}
	for k := len(p.heap)/2 - 1; k >= 0; k-- {
		p.down(k)
	}
	return p
}

func (p *leastConn) Pick(_ netip.AddrPort, n int, dst []int) []int {
	if n <= 0 {
		return dst
	}
	now := p.clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.absorb(now)
	from := len(dst)
	// Every backend considered is judged by its live state: at most once
	// per backend in the pool and candidate, after which the heap's order
	// is taken as it is (a bound against loads that change faster than
	// we look).
	checks := len(p.weights) + n
	if n > maxFrontier/2 {
		return p.pickByPopping(now, n, from, dst, checks)
	}
	winner := -1
	for len(p.heap) > 0 {
		top := int(p.heap[0])
		if checks > 0 {
			checks--
			if p.refresh(top, now, false) {
				continue
			}
		}
		if !p.st.Usable(top) {
			p.remove(top)
			continue
		}
		winner = top
		break
	}
	if winner < 0 {
		return dst
	}
	dst = append(dst, winner)
	for len(dst)-from < n {
		var ok, again bool
		if dst, ok, again = p.nextBest(now, from, dst, &checks); !again && !ok {
			break
		}
	}
	// The winner goes behind its equals; the fallbacks keep their place.
	p.seq[winner] = p.nextSeq
	p.nextSeq++
	p.down(int(p.pos[winner]))
	return dst
}

// maxFrontier bounds the search for fallbacks below; picks of more than
// half as many candidates pop them off the heap instead.
const maxFrontier = 64

// nextBest appends the best backend not yet in dst[from:], found by a
// best-first search from the heap's root (a node's children are never
// better than it, so the k best are within k steps of the root). It
// reports whether it appended one, or whether it changed the heap (a
// stale or unusable candidate) and must be called again.
func (p *leastConn) nextBest(now time.Time, from int, dst []int, checks *int) ([]int, bool, bool) {
	var buf [maxFrontier]int32
	front := append(buf[:0], 0)
	for len(front) > 0 && len(p.heap) > 0 {
		m := 0
		for j := 1; j < len(front); j++ {
			if p.less(p.heap[front[j]], p.heap[front[m]]) {
				m = j
			}
		}
		k := int(front[m])
		front[m] = front[len(front)-1]
		front = front[:len(front)-1]
		for c := 2*k + 1; c <= 2*k+2 && c < len(p.heap); c++ {
			front = append(front, int32(c))
		}
		i := int(p.heap[k])
		if contains(dst[from:], i) {
			continue
		}
		if *checks > 0 {
			*checks--
			if p.refresh(i, now, false) {
				return dst, false, true
			}
		}
		if !p.st.Usable(i) {
			p.remove(i)
			return dst, false, true
		}
		return append(dst, i), true, false
	}
	return dst, false, false
}

// pickByPopping serves picks of many candidates: it takes each off the
// heap in turn and puts them all back.
func (p *leastConn) pickByPopping(now time.Time, n, from int, dst []int, checks int) []int {
	for len(dst)-from < n && len(p.heap) > 0 {
		top := int(p.heap[0])
		if checks > 0 {
			checks--
			if p.refresh(top, now, false) {
				continue
			}
		}
		if !p.st.Usable(top) {
			p.remove(top)
			continue
		}
		p.remove(top)
		dst = append(dst, top)
	}
	for k, i := range dst[from:] {
		if k == 0 {
			p.seq[i] = p.nextSeq
			p.nextSeq++
		}
		p.insert(i)
	}
	return dst
}

// absorb takes in what changed since the last pick: the queued
// notifications, a few polled backends, a few ramping ones.
func (p *leastConn) absorb(now time.Time) {
	p.drain(func(i int) { p.refresh(i, now, true) })
	for range p.polls {
		p.refresh(p.cursor, now, true)
		if p.cursor++; p.cursor == len(p.weights) {
			p.cursor = 0
		}
	}
	if p.slowStart > 0 {
		for range rampPolls {
			if i := p.ramp.take(); i >= 0 {
				p.refresh(i, now, false)
			}
		}
	}
}

// refresh re-reads i's load and effective weight, and with checkUsable its
// usability (parking or unparking it), and requeues i if anything that
// orders it changed. It reports whether i moved.
func (p *leastConn) refresh(i int, now time.Time, checkUsable bool) bool {
	if p.weights[i] == 0 {
		return false
	}
	load, w := p.st.Active(i)+1, p.effectiveWeight(i, now)
	p.noteRampWeight(i, w)
	if checkUsable {
		switch usable, in := p.st.Usable(i), p.pos[i] >= 0; {
		case !usable && in:
			p.remove(i)
			p.load[i], p.weight[i] = load, w
			return true
		case usable && !in:
			p.load[i], p.weight[i] = load, w
			p.seq[i] = p.nextSeq
			p.nextSeq++
			p.insert(i)
			return true
		}
	}
	if load == p.load[i] && w == p.weight[i] {
		return false
	}
	p.load[i], p.weight[i] = load, w
	if p.pos[i] < 0 {
		return false
	}
	p.seq[i] = p.nextSeq
	p.nextSeq++
	p.fix(int(p.pos[i]))
	return true
}

func (p *leastConn) noteRamp(i int) { p.noteRampWeight(i, p.weight[i]) }

func (p *leastConn) noteRampWeight(i int, w int64) {
	if p.slowStart > 0 {
		p.ramp.set(i, w < p.fullWeight(i))
	}
}

// less orders the heap: lower (active+1)/weight first, then the earlier
// requeued.
func (p *leastConn) less(a, b int32) bool {
	x, y := p.load[a]*p.weight[b], p.load[b]*p.weight[a]
	if x != y {
		return x < y
	}
	return p.seq[a] < p.seq[b]
}

func (p *leastConn) swap(j, k int) {
	p.heap[j], p.heap[k] = p.heap[k], p.heap[j]
	p.pos[p.heap[j]] = int32(j)
	p.pos[p.heap[k]] = int32(k)
}

func (p *leastConn) up(k int) {
	for k > 0 {
		parent := (k - 1) / 2
		if !p.less(p.heap[k], p.heap[parent]) {
			return
		}
		p.swap(k, parent)
		k = parent
	}
}

func (p *leastConn) down(k int) {
	n := len(p.heap)
	for {
		l := 2*k + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && p.less(p.heap[r], p.heap[l]) {
			m = r
		}
		if !p.less(p.heap[m], p.heap[k]) {
			return
		}
		p.swap(k, m)
		k = m
	}
}

func (p *leastConn) fix(k int) {
	p.up(k)
	p.down(k)
}

func (p *leastConn) insert(i int) {
	p.pos[i] = int32(len(p.heap))
	p.heap = append(p.heap, int32(i))
	p.up(len(p.heap) - 1)
}

func (p *leastConn) remove(i int) {
	k := int(p.pos[i])
	last := len(p.heap) - 1
	if k != last {
		p.swap(k, last)
	}
	p.heap = p.heap[:last]
	p.pos[i] = -1
	if k != last {
		p.fix(k)
	}
}

// Order lists the weighted backends by load per weight, lowest first.
func (p *leastConn) Order(_ netip.AddrPort, dst []int) []int {
	return orderByLoad(&p.common, dst)
}

// orderByLoad appends the weighted backends sorted by (active+1)/weight.
func orderByLoad(c *common, dst []int) []int {
	now := c.clock()
	from := len(dst)
	dst = c.scan(0, from, from+len(c.weights), false, dst)
	type score struct{ load, weight int64 }
	scores := make([]score, len(c.weights))
	for _, i := range dst[from:] {
		scores[i] = score{c.st.Active(i) + 1, c.effectiveWeight(i, now)}
	}
	slices.SortStableFunc(dst[from:], func(a, b int) int {
		return cmp.Compare(scores[a].load*scores[b].weight, scores[b].load*scores[a].weight)
	})
	return dst
}
