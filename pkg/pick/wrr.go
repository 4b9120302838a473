package pick

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// weightedRoundRobin is nginx's smooth weighted round robin: on every pick
// each usable backend's current weight grows by its effective weight, the
// largest wins (the lowest index on ties) and gives back the total. A 5:1:1
// pool gets a a b a c a a, never five in a row.
//
// Fallbacks are the runners-up by current weight after the pick. The state
// is guarded by a mutex: the algorithm is only smooth when one sequence
// serves the whole pool.
//
// Backends of the same effective weight gain the same amount on every
// pick, so their order by current weight only changes when one of them
// wins. They therefore share a class: a max-heap ordered by current weight
// (then index) whose common gain is the class's weight times the picks
// since it was formed. A pick compares the classes' tops (cached in the
// class) and requeues the winner: O(classes + log n), and the sequence is
// nginx's exactly. Pools have few distinct weights (at most MaxWeight); a
// backend in its slow-start ramp joins the class of its weight rounded to
// 1/32 of its configured weight (see rampWeight), so classes stay few
// however many backends ramp at once. Without slow start nothing is
// allocated after New; with it, a ramp level's class is allocated the
// first time it forms, and its heap grows the first times it fills.
//
// Usability is read live for every backend a pick returns; one found
// unusable is parked with its current weight frozen, as if it had sat out
// this pick, and the winner gets back the share of the total it was charged
// for it. Parked backends come back when Changed, polling (see Notified) or
// the construction-time check finds them usable.
type weightedRoundRobin struct {
	common
	changes
	mu      sync.Mutex
	classes []*wrrClass         // classes with members
	byW     map[int64]*wrrClass // every class made, by weight
	class   []*wrrClass         // class[i]: i's class; nil when parked (or weight 0)
	key     []int64             // member: current weight minus its class's gain; parked: current weight
	hpos    []int32             // i's index in its class's heap; -1 while taken out by a pick
	total   int64               // effective weight of all members
	taken   [maxTaken]int32     // backends a pick took out of their heaps
	tops    [maxFrontier / 2]classTop
	round   int64 // picks made (since the last fold, see foldLimit)
	ramp    rampSet
	polls   int
	cursor  int
}

// maxTaken bounds the candidates one pick takes out of the heaps; further
// fallbacks (n > maxTaken) are found by a scan. Picks of fewer than
// maxFrontier/2 candidates search for their fallbacks without taking
// anything out.
const maxTaken = 32

// wrrClass is the backends of one effective weight.
type wrrClass struct {
	w       int64   // every member's effective weight
	base    int64   // w × round when the class was last formed: its gain is w × round - base
	heap    []int32 // members by current weight, highest first, then lowest index
	topKey  int64   // key of heap[0], kept with the heap so a pick reads only the class
	topIdx  int32   // heap[0], -1 when the heap is empty
	members int     // in heap or taken out by the pick in progress
	at      int     // index in classes, -1 when empty
}

// foldLimit bounds the round counter: past it every class's gain is folded
// into its members' keys and the count starts over, far from overflow
// (weights are at most 2^18, so gains stay below 2^58).
const foldLimit = 1 << 40

// gain is what every member of c has gained since c was formed.
func (p *weightedRoundRobin) gain(c *wrrClass) int64 { return c.w*p.round - c.base }

// fold moves every class's gain into its members' keys and restarts the
// round count (once in 2^40 picks).
func (p *weightedRoundRobin) fold() {
	for _, c := range p.classes {
		g := p.gain(c)
		for _, i := range c.heap {
			p.key[i] += g
		}
		c.base = 0
		p.setTop(c)
	}
	// Members taken out of their heaps exist only inside a pick, never here.
	p.round = 0
}

// setTop caches c's top after its heap or the top's key changed.
func (p *weightedRoundRobin) setTop(c *wrrClass) {
	if len(c.heap) == 0 {
		c.topIdx = -1
		return
	}
	c.topIdx = c.heap[0]
	c.topKey = p.key[c.topIdx]
}

func newWeightedRoundRobin(c common, notified bool) *weightedRoundRobin {
	n := len(c.weights)
	p := &weightedRoundRobin{
		common:  c,
		changes: newChanges(n),
		byW:     make(map[int64]*wrrClass),
		class:   make([]*wrrClass, n),
		key:     make([]int64, n),
		hpos:    make([]int32, n),
		polls:   pollsFor(n, notified),
	}
	if c.slowStart > 0 {
		p.ramp = newRampSet(n)
	}
	// One class per configured weight, sized for all its backends, so that
	// a pool without slow start never allocates after this.
	count := make(map[int64]int)
	for i := range n {
		if w := p.fullWeight(i); w > 0 {
			count[w]++
		}
	}
	for w, k := range count {
		p.byW[w] = &wrrClass{w: w, heap: make([]int32, 0, k), at: -1, topIdx: -1}
	}
	p.classes = make([]*wrrClass, 0, len(count))
	now := p.clock()
	for i := range n {
		if p.weights[i] > 0 && p.st.Usable(i) {
			p.join(i, p.rampWeight(i, now))
		}
	}
	return p
}

// rampWeight is i's effective weight, rounded during the slow-start ramp to
// a multiple of 1/32 of its configured weight (so that ramping backends
// share few classes). Outside the ramp it is the full weight.
func (p *weightedRoundRobin) rampWeight(i int, now time.Time) int64 {
	w, full := p.effectiveWeight(i, now), p.fullWeight(i)
	if w >= full {
		return full
	}
	step := full / 32
	level := min(max((w+step/2)/step, 1), 32)
	return level * step
}

func (p *weightedRoundRobin) current(i int) int64 {
	if c := p.class[i]; c != nil {
		return p.key[i] + p.gain(c)
	}
	return p.key[i]
}

// join makes parked i a member of the class of weight w, keeping its
// current weight.
func (p *weightedRoundRobin) join(i int, w int64) {
	c := p.byW[w]
	if c == nil {
		c = &wrrClass{w: w, at: -1, topIdx: -1}
		p.byW[w] = c
	}
	if c.at < 0 {
		c.base = c.w * p.round
		c.at = len(p.classes)
		p.classes = append(p.classes, c)
	}
	p.key[i] -= p.gain(c)
	p.class[i] = c
	c.members++
	p.total += w
	p.push(c, i)
	if p.slowStart > 0 {
		p.ramp.set(i, w < p.fullWeight(i))
	}
}

// leave parks member i (in its heap, not taken out), freezing its current
// weight.
func (p *weightedRoundRobin) leave(i int) {
	c := p.class[i]
	p.removeAt(c, int(p.hpos[i]))
	p.key[i] += p.gain(c)
	p.class[i] = nil
	c.members--
	p.total -= c.w
	if c.members == 0 {
		last := p.classes[len(p.classes)-1]
		p.classes[c.at] = last
		last.at = c.at
		p.classes = p.classes[:len(p.classes)-1]
		c.at = -1
	}
}

// refresh re-reads i's usability and effective weight between picks,
// parking, unparking or moving it to another class.
func (p *weightedRoundRobin) refresh(i int, now time.Time) {
	if p.weights[i] == 0 {
		return
	}
	if !p.st.Usable(i) {
		if p.class[i] != nil {
			p.leave(i)
		}
		if p.slowStart > 0 {
			p.ramp.set(i, false)
		}
		return
	}
	w := p.rampWeight(i, now)
	if c := p.class[i]; c != nil {
		if c.w == w {
			return
		}
		p.leave(i)
	}
	p.join(i, w)
}

func (p *weightedRoundRobin) absorb(now time.Time) {
	p.drain(func(i int) { p.refresh(i, now) })
	for range p.polls {
		p.refresh(p.cursor, now)
		if p.cursor++; p.cursor == len(p.weights) {
			p.cursor = 0
		}
	}
	if p.slowStart > 0 {
		for range rampPolls {
			if i := p.ramp.take(); i >= 0 {
				p.refresh(i, now)
			}
		}
	}
}

// best returns the member with the highest current weight (the lowest
// index on ties) among those in the heaps, or -1.
func (p *weightedRoundRobin) best() int {
	best, bestCur := -1, int64(0)
	for _, c := range p.classes {
		if c.topIdx < 0 {
			continue
		}
		i := int(c.topIdx)
		if cur := c.topKey + p.gain(c); best < 0 || cur > bestCur || (cur == bestCur && i < best) {
			best, bestCur = i, cur
		}
	}
	return best
}

// classTop is the top of a class's heap and its current weight.
type classTop struct {
	c   *wrrClass
	i   int32
	cur int64
}

func (t classTop) ahead(cur int64, i int32) bool { return t.cur > cur || (t.cur == cur && t.i < i) }

// topClasses returns the tops of the best k classes, best first, in one
// pass over the classes, which reads nothing but the classes.
func (p *weightedRoundRobin) topClasses(k int) []classTop {
	tops := p.tops[:0]
	round := p.round
	// The k-th best so far: a class must beat it to enter.
	lastCur, lastIdx := int64(0), int32(-1)
	for _, c := range p.classes {
		i := c.topIdx
		if i < 0 {
			continue
		}
		cur := c.topKey + c.w*round - c.base
		if len(tops) == k && (lastCur > cur || (lastCur == cur && lastIdx < i)) {
			continue
		}
		if len(tops) < k {
			tops = append(tops, classTop{})
		}
		j := len(tops) - 1
		for ; j > 0 && !tops[j-1].ahead(cur, i); j-- {
			tops[j] = tops[j-1]
		}
		tops[j] = classTop{c, i, cur}
		last := tops[len(tops)-1]
		lastCur, lastIdx = last.cur, last.i
	}
	return tops
}

func (p *weightedRoundRobin) Pick(_ netip.AddrPort, n int, dst []int) []int {
	if n <= 0 {
		return dst
	}
	now := p.clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.absorb(now)
	if len(p.classes) == 0 {
		return dst
	}
	// Every member gains its weight (the round); the best n+1 classes'
	// tops hold the winner and whatever can be a runner-up but their
	// heaps' members.
	if p.round++; p.round > foldLimit {
		p.fold()
	}
	k := min(n+1, len(p.tops))
	tops := p.topClasses(k)
	winner := -1
	for len(tops) > 0 {
		if i := int(tops[0].i); p.st.Usable(i) {
			winner = i
			break
		}
		// It sat this pick out: no gain, and no share of the total.
		i := int(tops[0].i)
		w := p.class[i].w
		p.leave(i)
		p.key[i] -= w
		tops = p.topClasses(k)
	}
	if winner < 0 {
		return dst
	}
	c := p.class[winner]
	p.key[winner] -= p.total
	p.down(c, int(p.hpos[winner]))
	dst = append(dst, winner)
	if n == 1 {
		return dst
	}
	from := len(dst) - 1
	if n < len(p.tops) {
		return p.runnersUp(winner, n, k, from, dst, tops)
	}
	// Too many candidates for the search: take each runner-up out of its
	// heap so the next best shows.
	taken := p.taken[:0]
	p.takeOut(winner)
	taken = append(taken, int32(winner))
	for len(dst)-from < n {
		next := p.best()
		if next < 0 {
			break
		}
		if !p.st.Usable(next) {
			p.sitOut(next, winner)
			continue
		}
		dst = append(dst, next)
		if len(taken) < cap(taken) {
			p.takeOut(next)
			taken = append(taken, int32(next))
		} else {
			dst = p.restByCurrent(n, from, dst)
			break
		}
	}
	for _, i := range taken {
		p.push(p.class[i], int(i))
	}
	return dst
}

// sitOut parks i, found unusable after winner was charged the total: i
// gains nothing this pick, and the winner gets back i's part of the total.
func (p *weightedRoundRobin) sitOut(i, winner int) {
	w := p.class[i].w
	p.leave(i)
	p.key[i] -= w
	p.key[winner] += w
	if c := p.class[winner]; p.hpos[winner] >= 0 {
		p.up(c, int(p.hpos[winner]))
	}
}

// runnersUp appends the fallbacks after winner, highest current weight
// first, by a best-first search from the tops of the classes in tops (the
// best k before winner was charged, so the best k-1 besides winner's own,
// enough for n-1 runners-up; a member is never ahead of its parent in its
// heap). An unusable candidate is parked and the search starts over.
func (p *weightedRoundRobin) runnersUp(winner, n, k, from int, dst []int, tops []classTop) []int {
	type spot struct {
		c *wrrClass
		k int
	}
	var buf [maxFrontier]spot
	front := buf[:0]
	for _, t := range tops {
		if len(t.c.heap) > 0 {
			front = append(front, spot{t.c, 0})
		}
	}
	for len(front) > 0 && len(dst)-from < n {
		m, bestCur, best := 0, int64(0), int32(-1)
		for j, s := range front {
			i := s.c.heap[s.k]
			if cur := p.key[i] + p.gain(s.c); best < 0 || cur > bestCur || (cur == bestCur && i < best) {
				m, bestCur, best = j, cur, i
			}
		}
		s := front[m]
		front[m] = front[len(front)-1]
		front = front[:len(front)-1]
		for c := 2*s.k + 1; c <= 2*s.k+2 && c < len(s.c.heap); c++ {
			front = append(front, spot{s.c, c})
		}
		i := int(best)
		if contains(dst[from:], i) {
			continue
		}
		if !p.st.Usable(i) {
			p.sitOut(i, winner)
			front = front[:0]
			for _, t := range p.topClasses(k) {
				front = append(front, spot{t.c, 0})
			}
			continue
		}
		dst = append(dst, i)
	}
	return dst
}

// restByCurrent appends the remaining fallbacks, highest current weight
// first, by a scan (only for n > maxTaken).
func (p *weightedRoundRobin) restByCurrent(n, from int, dst []int) []int {
	for len(dst)-from < n {
		next := -1
		for i := range p.weights {
			if p.class[i] == nil || contains(dst[from:], i) || !p.st.Usable(i) {
				continue
			}
			if next < 0 || p.current(i) > p.current(next) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		dst = append(dst, next)
	}
	return dst
}

// takeOut removes member i from its heap for the rest of the pick.
func (p *weightedRoundRobin) takeOut(i int) {
	p.removeAt(p.class[i], int(p.hpos[i]))
}

// Heap of a class: higher current weight first, then lower index. The
// class's gain is common to all, so keys compare as current weights do.
// Every change of a heap ends in up or down, which refresh the cached top.
func (p *weightedRoundRobin) before(a, b int32) bool {
	if p.key[a] != p.key[b] {
		return p.key[a] > p.key[b]
	}
	return a < b
}

func (p *weightedRoundRobin) swap(c *wrrClass, j, k int) {
	c.heap[j], c.heap[k] = c.heap[k], c.heap[j]
	p.hpos[c.heap[j]] = int32(j)
	p.hpos[c.heap[k]] = int32(k)
}

func (p *weightedRoundRobin) up(c *wrrClass, k int) {
	for k > 0 {
		parent := (k - 1) / 2
		if !p.before(c.heap[k], c.heap[parent]) {
			break
		}
		p.swap(c, k, parent)
		k = parent
	}
	p.setTop(c)
}

func (p *weightedRoundRobin) down(c *wrrClass, k int) {
	n := len(c.heap)
	for {
		l := 2*k + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && p.before(c.heap[r], c.heap[l]) {
			m = r
		}
		if !p.before(c.heap[m], c.heap[k]) {
			break
		}
		p.swap(c, k, m)
		k = m
	}
	p.setTop(c)
}

func (p *weightedRoundRobin) push(c *wrrClass, i int) {
	p.hpos[i] = int32(len(c.heap))
	c.heap = append(c.heap, int32(i))
	p.up(c, len(c.heap)-1)
}

func (p *weightedRoundRobin) removeAt(c *wrrClass, k int) {
	i := c.heap[k]
	last := len(c.heap) - 1
	if k != last {
		p.swap(c, k, last)
	}
	c.heap = c.heap[:last]
	p.hpos[i] = -1
	if k != last {
		p.up(c, k)
		p.down(c, k)
	}
	p.setTop(c)
}

// Order lists the weighted backends by current weight, highest first: the
// order the next picks would favour.
func (p *weightedRoundRobin) Order(_ netip.AddrPort, dst []int) []int {
	from := len(dst)
	dst = p.scan(0, from, from+len(p.weights), false, dst)
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.SortStableFunc(dst[from:], func(a, b int) int { return cmp.Compare(p.current(b), p.current(a)) })
	return dst
}
