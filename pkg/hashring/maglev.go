package hashring

import (
	"fmt"
)

// MaxMaglevSize bounds the table (4 bytes per slot).
const MaxMaglevSize = 1<<24 - 3 // a prime

// Maglev is the lookup table of Google's Maglev load balancer (Eisenbud et
// al., NSDI 2016), weighted as in Envoy: a node of weight w takes a turn to
// claim its next preferred free slot w/maxWeight as often as the heaviest
// node, so slot shares follow weights almost exactly.
//
// Node permutations come from its ID only: offset = hash(ID) mod size,
// skip = hash(ID + "/skip") mod (size-1) + 1; the filling rounds visit the
// nodes in ID order. So the table never depends on the order of the input.
//
// Fallbacks (Successors) are the owners of the slots that follow the key's
// slot, wrapping around. Slots are filled in a pseudo-random order, so the
// keys of a missing node spread over the others in proportion to their
// shares, and the choice is stable for as long as the table is.
//
// A Maglev is immutable and safe for concurrent use.
type Maglev struct {
	table    []int32 // node index per slot; -1 only when no node has weight
	weights  []int32
	weighted int
	bits     bitsets // for walks that meet many of many nodes
}

// NewMaglev builds a table of size slots over nodes. size must be a prime,
// as the permutations require, no smaller than the number of weighted
// nodes and at most MaxMaglevSize; the Maglev paper wants size >= 100 ×
// nodes for a 1% imbalance.
func NewMaglev(nodes []Node, size int, hash HashFunc) (*Maglev, error) {
	weighted, err := checkNodes(nodes)
	if err != nil {
		return nil, err
	}
	if size < 2 || size > MaxMaglevSize || !isPrime(size) {
		return nil, fmt.Errorf("size %d is not a prime in [2, %d]: %w", size, MaxMaglevSize, ErrTableSize)
	}
	if size < weighted {
		return nil, fmt.Errorf("size %d is smaller than %d nodes: %w", size, weighted, ErrTableSize)
	}
	hash = orDefault(hash)
	m := &Maglev{
		table:    make([]int32, size),
		weights:  make([]int32, len(nodes)),
		weighted: weighted,
	}
	for i, n := range nodes {
		m.weights[i] = int32(n.Weight)
	}
	for i := range m.table {
		m.table[i] = -1
	}
	if weighted == 0 {
		return m, nil
	}
	type entry struct {
		node   int32
		weight uint64
		next   uint64 // current permutation position
		skip   uint64
		target uint64 // when (iteration × weight) reaches it, a turn is due
	}
	entries := make([]entry, 0, weighted)
	var maxWeight uint64
	usize := uint64(size)
	for _, i := range byID(nodes) {
		w := uint64(nodes[i].Weight)
		if w == 0 {
			continue
		}
		id := nodes[i].ID
		entries = append(entries, entry{
			node:   int32(i),
			weight: w,
			next:   hash([]byte(id)) % usize,
			skip:   hash([]byte(id+"/skip"))%(usize-1) + 1,
		})
		maxWeight = max(maxWeight, w)
	}
	filled := 0
	for iteration := uint64(1); filled < size; iteration++ {
		for k := range entries {
			e := &entries[k]
			if iteration*e.weight < e.target {
				continue
			}
			e.target += maxWeight
			for m.table[e.next] >= 0 {
				e.next += e.skip
				if e.next >= usize {
					e.next -= usize
				}
			}
			m.table[e.next] = e.node
			filled++
			if filled == size {
				break
			}
		}
	}
	return m, nil
}

// Size returns the number of slots.
func (m *Maglev) Size() int { return len(m.table) }

// Nodes returns the number of nodes the table was built from (including
// those of weight 0).
func (m *Maglev) Nodes() int { return len(m.weights) }

// Slot returns the node that owns slot s, or -1 when no node has weight.
func (m *Maglev) Slot(s int) int { return int(m.table[s]) }

// Lookup returns the node that owns key (slot key mod Size), or -1 when no
// node has weight.
func (m *Maglev) Lookup(key uint64) int { return int(m.table[key%uint64(len(m.table))]) }

// Successors appends to dst up to n distinct nodes, starting with key's
// owner and continuing with the owners of the following slots, skipping
// nodes that accept rejects (nil accepts every node) and nodes already in
// dst. The cost and allocation rules are those of Ring.Successors.
func (m *Maglev) Successors(key uint64, dst []int, n int, accept func(node int) bool) []int {
	return m.SuccessorsIn(key, nil, dst, n, accept)
}

// SuccessorsIn is Successors over the nodes in mask only (nil: all), made
// by NewMask, as Ring.SuccessorsIn.
func (m *Maglev) SuccessorsIn(key uint64, mask *Mask, dst []int, n int, accept func(node int) bool) []int {
	if m.weighted == 0 {
		return dst
	}
	mask.check(m.table)
	return walk(m.table, int(key%uint64(len(m.table))), m.weights, m.weighted, dst, n, accept, &m.bits, mask)
}

// NewMask returns a mask over the table's slots with every node in.
func (m *Maglev) NewMask() *Mask { return NewMask(m.table, len(m.weights)) }

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
