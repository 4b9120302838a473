package hashring

import (
	"math/bits"
	"sync"
)

// smallSetWords bounds the on-stack bitmap used to remember visited nodes
// in walks over up to 64*smallSetWords nodes.
const smallSetWords = 16

// visitedList is how many nodes a walk over more nodes than that remembers
// in a list on its stack before it takes a recycled bitmap: most walks
// meet a handful of nodes, and a list of 16 costs less to search than a
// bitmap costs to fetch and clear.
const visitedList = 16

// bitset is a fixed-size set of node indices.
type bitset []uint64

// bitsets recycles the bitmaps of walks over more than 64*smallSetWords
// nodes that meet more than visitedList of them, so that they allocate
// only until the pool is warm.
type bitsets struct{ pool sync.Pool }

func (b *bitsets) get(words int) *bitset {
	if s, ok := b.pool.Get().(*bitset); ok && len(*s) == words {
		return s
	}
	s := make(bitset, words)
	return &s
}

// put clears s and keeps it for the next walk.
func (b *bitsets) put(s *bitset) {
	clear(*s)
	b.pool.Put(s)
}

func (b bitset) has(i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) add(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }

// visited is the set of nodes a walk has met: a bitmap on the caller's
// stack for small pools; for large ones a list, then a recycled bitmap
// once the list is full (spill). It holds no pointer but bits, so that
// the stack bitmap stays on the stack.
type visited struct {
	bits bitset
	list [visitedList]int32
	n    int // entries in list
}

// add marks node as met and reports whether it was not yet. Unless bits
// is set, the list must not be full.
func (v *visited) add(node int) bool {
	if v.bits != nil {
		if v.bits.has(node) {
			return false
		}
		v.bits.add(node)
		return true
	}
	for _, x := range v.list[:v.n] {
		if int(x) == node {
			return false
		}
	}
	v.list[v.n] = int32(node)
	v.n++
	return true
}

// countIn is how many of the nodes met are in m now.
func (v *visited) countIn(m *Mask) int {
	n := 0
	if v.bits != nil {
		for w, word := range v.bits {
			for ; word != 0; word &= word - 1 {
				if m.Has(w*64 + bits.TrailingZeros64(word)) {
					n++
				}
			}
		}
		return n
	}
	for _, x := range v.list[:v.n] {
		if m.Has(int(x)) {
			n++
		}
	}
	return n
}

// full reports whether add needs a bitmap first.
func (v *visited) full() bool { return v.bits == nil && v.n == len(v.list) }

// spill moves v's list to a bitmap for nodes nodes taken from big (a new
// one when big is nil) and returns what to give back to big.
func spill(v *visited, nodes int, big *bitsets) *bitset {
	words := (nodes + 63) / 64
	var taken *bitset
	if big == nil {
		b := make(bitset, words)
		v.bits = b
	} else {
		taken = big.get(words)
		v.bits = *taken
	}
	for _, x := range v.list {
		v.bits.add(int(x))
	}
	return taken
}

// walk appends to dst up to n distinct nodes accepted by accept (nil accepts
// all), taken from the cyclic sequence seq starting at position start. Nodes
// already in dst are skipped. weights has one entry per node index; exactly
// the nodes of weight > 0 occur in seq, and weighted counts them. With a
// mask in (over seq) the walk steps only on the positions of nodes in it,
// as if accept rejected the others.
//
// A walk visits each position at most once, calls accept once per node,
// and stops as soon as it has met every node it could meet (weighted, or
// the mask's), so a walk whose candidates are all rejected costs about as
// many steps as a coupon collector needs, not a whole table. That is still
// O(nodes) when nearly all nodes are rejected: a predicate can only be
// learnt node by node. A mask that leaves out the nodes accept would reject
// bounds the walk by what it returns instead: it meets only nodes in the
// mask, and reaches each through Mask.Next without stepping over the
// positions of the others.
func walk(seq []int32, start int, weights []int32, weighted int, dst []int, n int, accept func(node int) bool, big *bitsets, in *Mask) []int {
	if n <= 0 || len(seq) == 0 {
		return dst
	}
	nodes := len(weights)
	var small [smallSetWords]uint64
	var v visited
	if nodes <= smallSetWords*64 {
		v.bits = small[:(nodes+63)/64]
	}
	var taken *bitset
	meet := func(node int) bool {
		if v.full() {
			taken = spill(&v, nodes, big)
		}
		return v.add(node)
	}
	defer func() {
		if taken != nil {
			big.put(taken)
		}
	}()
	// met counts the distinct nodes seen that the walk could meet; once it
	// reaches target no position is left that could add one.
	target := weighted
	if in != nil {
		target = in.Nodes()
	}
	met := 0
	for _, d := range dst {
		if d >= 0 && d < nodes && weights[d] > 0 && meet(d) && (in == nil || in.Has(d)) {
			met++
		}
	}
	want := len(dst) + n
	p := start
	passed := 0 // positions from start to p, so that no position is visited twice
	for {
		if met >= target {
			if in == nil {
				break
			}
			// The mask may have changed under the walk (its one writer
			// does not wait for readers): a node met while in it may have
			// left and another come in. Stop only once every node in it
			// now has been met.
			if target, met = in.Nodes(), v.countIn(in); met >= target {
				break
			}
		}
		q := p
		if in != nil {
			if q = in.Next(p); q < 0 {
				break
			}
			if q < p {
				passed += len(seq) - p + q
			} else {
				passed += q - p
			}
		}
		if passed >= len(seq) {
			break
		}
		passed++
		node := int(seq[q])
		if p = q + 1; p == len(seq) {
			p = 0
		}
		if !meet(node) {
			continue
		}
		met++
		if accept == nil || accept(node) {
			dst = append(dst, node)
			if len(dst) == want {
				break
			}
		}
	}
	return dst
}
