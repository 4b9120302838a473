package hashring

import "math"

// Capacity returns the most load a node of the given weight may carry under
// "consistent hashing with bounded loads" (Mirrokni, Thorup, Zadimoghaddam):
// ceil(factor × (totalLoad+1) × weight / totalWeight), the +1 making room for
// the item being placed. With equal weights a node accepted while its load is
// below Capacity ends up with at most ceil(factor × average) items. Capacity
// returns 0 when weight or totalWeight is not positive.
func Capacity(factor float64, totalLoad int64, weight, totalWeight int) int64 {
	if weight <= 0 || totalWeight <= 0 {
		return 0
	}
	return int64(math.Ceil(factor * float64(totalLoad+1) * float64(weight) / float64(totalWeight)))
}

// LoadFunc reports a node's current load and whether it may take keys at all.
type LoadFunc func(node int) (load int64, ok bool)

// LookupBounded returns the first node in ring order from key whose load is
// below its Capacity, counting only nodes that load reports ok, or -1 when
// there is none. factor must be > 1 for a node to be guaranteed; the average
// is over the eligible nodes. It calls load about twice per node, so it costs
// O(nodes): that is the price of knowing the average.
func (r *Ring) LookupBounded(key uint64, factor float64, load LoadFunc) int {
	var total int64
	var totalWeight int
	for i, w := range r.weights {
		if w == 0 {
			continue
		}
		if l, ok := load(i); ok {
			total += l
			totalWeight += int(w)
		}
	}
	var one [1]int
	got := r.Successors(key, one[:0], 1, func(node int) bool {
		l, ok := load(node)
		return ok && l < Capacity(factor, total, int(r.weights[node]), totalWeight)
	})
	if len(got) == 0 {
		return -1
	}
	return got[0]
}

// Weight returns the weight node i was built with.
func (r *Ring) Weight(i int) int { return int(r.weights[i]) }
