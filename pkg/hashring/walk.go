package hashring

import "sync"

// smallSetWords bounds the on-stack bitmap used to remember visited nodes:
// up to 64*smallSetWords nodes a walk allocates nothing and stops as soon as
// it has met every node.
const smallSetWords = 16

// bitset is a fixed-size set of node indices.
type bitset []uint64

// bitsets recycles the bitmaps of walks over more than 64*smallSetWords
// nodes, so that they allocate only until the pool is warm.
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

// walk appends to dst up to n distinct nodes accepted by accept (nil accepts
// all), taken from the cyclic sequence seq starting at position start. Nodes
// already in dst are skipped. weights has one entry per node index; exactly
// the nodes of weight > 0 occur in seq, and weighted counts them.
//
// A walk visits each position at most once, and with the bitmap it stops as
// soon as every node occurring in seq has been considered, so a walk over a
// pool whose nodes are all rejected costs about as many steps as a coupon
// collector needs, not a whole table.
//
// Walks over more than 64*smallSetWords nodes that want more than 8 nodes
// take a recycled bitmap from big (a new one when big is nil).
func walk(seq []int32, start int, weights []int32, weighted int, dst []int, n int, accept func(node int) bool, big *bitsets) []int {
	if n <= 0 || len(seq) == 0 {
		return dst
	}
	nodes := len(weights)
	var small [smallSetWords]uint64
	var seen bitset
	switch {
	case nodes <= smallSetWords*64:
		seen = small[:(nodes+63)/64]
	case n > 8:
		// Long walks (a full preference order, or many retries) would be
		// quadratic with the scan below.
		if big == nil {
			seen = make(bitset, (nodes+63)/64)
			break
		}
		b := big.get((nodes + 63) / 64)
		defer big.put(b)
		seen = *b
	}
	met := 0
	if seen != nil {
		for _, d := range dst {
			if d >= 0 && d < nodes && weights[d] > 0 && !seen.has(d) {
				seen.add(d)
				met++
			}
		}
	}
	want := len(dst) + n
	p := start
	for range len(seq) {
		node := int(seq[p])
		if p++; p == len(seq) {
			p = 0
		}
		if seen != nil {
			if seen.has(node) {
				continue
			}
			seen.add(node)
			met++
		} else if contains(dst, node) {
			continue
		}
		if accept == nil || accept(node) {
			dst = append(dst, node)
			if len(dst) == want {
				break
			}
		}
		if met == weighted && seen != nil {
			break
		}
	}
	return dst
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
