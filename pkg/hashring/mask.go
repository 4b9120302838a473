package hashring

import (
	"math/bits"
	"sync/atomic"
)

// Mask is a set of nodes kept as one bit per position of a cyclic sequence
// of nodes (a ring's points, a Maglev table's slots): a position's bit is
// set while its node is in the set. A walk restricted to a Mask jumps from
// one set position to the next instead of stepping over the positions of
// nodes it would reject, so when nearly every node is out (disabled, down,
// full) a walk costs about what it returns, not the whole table: with only
// a predicate a walk has to meet the rejected nodes one by one to learn
// that they are rejected.
//
// A second level, one bit per word of positions (set while the word may be
// nonzero), lets Next skip 4,096 empty positions per word it reads.
//
// Set must not be called concurrently with itself (the caller serialises
// the writers); Next, Has and the walks may run concurrently with Set and
// see a node that is being set either in or out.
type Mask struct {
	seq     []int32 // shared with the structure the mask was made for
	starts  []int32 // node i's positions are byNode[starts[i]:starts[i+1]]
	byNode  []int32
	in      []bool // the writer's view of the set
	count   atomic.Int64
	words   []atomic.Uint64
	summary []atomic.Uint64
}

// NewMask returns a mask over the cyclic sequence seq of node indices in
// [0, nodes), with every node that occurs in seq in the set. seq is kept,
// not copied: it must not change while the mask is in use.
func NewMask(seq []int32, nodes int) *Mask {
	k := &Mask{
		seq:     seq,
		starts:  make([]int32, nodes+1),
		byNode:  make([]int32, len(seq)),
		in:      make([]bool, nodes),
		words:   make([]atomic.Uint64, (len(seq)+63)/64),
		summary: make([]atomic.Uint64, ((len(seq)+63)/64+63)/64),
	}
	// Counting sort of the positions by node, each node's in sequence order.
	for _, node := range seq {
		k.starts[node+1]++
	}
	for i := range nodes {
		k.starts[i+1] += k.starts[i]
	}
	fill := append([]int32(nil), k.starts[:nodes]...)
	for p, node := range seq {
		k.byNode[fill[node]] = int32(p)
		fill[node]++
	}
	for i := range nodes {
		k.Set(i, true)
	}
	return k
}

// check panics unless k is nil or was made over seq: a mask of another
// structure would send a walk to positions that mean other nodes.
func (k *Mask) check(seq []int32) {
	if k != nil && (len(k.seq) != len(seq) || len(seq) > 0 && &k.seq[0] != &seq[0]) {
		panic("hashring: mask made for another ring or table")
	}
}

// Len returns the number of positions.
func (k *Mask) Len() int { return len(k.seq) }

// Nodes returns how many nodes that occur in the sequence are in the set.
func (k *Mask) Nodes() int { return int(k.count.Load()) }

// Set puts node in the set or takes it out. Nodes out of range, or that
// occur nowhere in the sequence, are ignored.
func (k *Mask) Set(node int, in bool) {
	if node < 0 || node >= len(k.in) || k.in[node] == in {
		return
	}
	positions := k.byNode[k.starts[node]:k.starts[node+1]]
	if len(positions) == 0 {
		return
	}
	k.in[node] = in
	if in {
		// Counted before its bits appear, and uncounted after they are
		// gone, so that a walk never sees more nodes in the set than the
		// count: a walk that has met count nodes may stop.
		k.count.Add(1)
		for _, p := range positions {
			w := p >> 6
			k.words[w].Or(1 << (uint(p) & 63))
			k.summary[w>>6].Or(1 << (uint(w) & 63))
		}
		return
	}
	for _, p := range positions {
		k.words[p>>6].And(^(1 << (uint(p) & 63)))
	}
	for _, p := range positions {
		if w := p >> 6; k.words[w].Load() == 0 {
			k.summary[w>>6].And(^(1 << (uint(w) & 63)))
		}
	}
	k.count.Add(-1)
}

// Has reports whether node is in the set.
func (k *Mask) Has(node int) bool {
	if node < 0 || node >= len(k.in) || k.starts[node] == k.starts[node+1] {
		return false
	}
	p := k.byNode[k.starts[node]]
	return k.words[p>>6].Load()&(1<<(uint(p)&63)) != 0
}

// Next returns the first position at or after p, wrapping past the end,
// whose node is in the set, or -1 when the set is empty. 0 <= p < Len().
func (k *Mask) Next(p int) int {
	if q := k.nextBefore(p, len(k.seq)); q >= 0 {
		return q
	}
	return k.nextBefore(0, p)
}

// nextBefore returns the first set position in [p, end), or -1.
func (k *Mask) nextBefore(p, end int) int {
	if p >= end {
		return -1
	}
	w := p >> 6
	if b := k.words[w].Load() & (^uint64(0) << (uint(p) & 63)); b != 0 {
		if q := w<<6 + bits.TrailingZeros64(b); q < end {
			return q
		}
		return -1
	}
	lastWord := (end - 1) >> 6
	for w++; w <= lastWord; {
		s := w >> 6
		sb := k.summary[s].Load() & (^uint64(0) << (uint(w) & 63))
		for sb != 0 {
			ww := s<<6 + bits.TrailingZeros64(sb)
			if ww > lastWord {
				return -1
			}
			if b := k.words[ww].Load(); b != 0 {
				if q := ww<<6 + bits.TrailingZeros64(b); q < end {
					return q
				}
				return -1
			}
			sb &= sb - 1
		}
		w = (s + 1) << 6
	}
	return -1
}
