package hashring

import (
	"slices"
	"testing"
)

// TestLongWalksOverManyNodes: walks over more than 1024 nodes asking for
// more than 8 (a pool with many retries, or a full preference order) give
// the same nodes as the plain scan of the sequence, and stop allocating
// once their recycled bitmap is warm.
func TestLongWalksOverManyNodes(t *testing.T) {
	const nodes = 3000
	r, err := NewRing(equalNodes(nodes), 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMaglev(equalNodes(nodes), testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	odd := func(i int) bool { return i%2 == 1 }
	for _, tc := range []struct {
		name  string
		succ  func(key uint64, dst []int, n int, accept func(int) bool) []int
		seq   []int32
		start func(key uint64) int
	}{
		{"ring", r.Successors, r.owners, r.search},
		{"maglev", m.Successors, m.table, func(key uint64) int { return int(key % uint64(len(m.table))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k := range 20 {
				key := keyOf(k)
				for _, n := range []int{9, 17, 300} {
					got := tc.succ(key, nil, n, odd)
					// The reference: the sequence from key's position,
					// first occurrences of accepted nodes.
					var want []int
					for j := range tc.seq {
						node := int(tc.seq[(tc.start(key)+j)%len(tc.seq)])
						if odd(node) && !slices.Contains(want, node) {
							want = append(want, node)
							if len(want) == n {
								break
							}
						}
					}
					if !slices.Equal(got, want) {
						t.Fatalf("key %d n %d: got %d nodes %v..., want %d %v...", k, n, len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
					}
				}
			}
			dst := make([]int, 0, 17)
			tc.succ(keyOf(1), dst, 17, nil) // warm the bitmap
			if allocs := testing.AllocsPerRun(100, func() { dst = tc.succ(keyOf(2), dst[:0], 17, odd) }); allocs != 0 {
				t.Errorf("%v allocations per walk of 17 over %d nodes", allocs, nodes)
			}
		})
	}
}

// scaleNodes is the pool size of the issue: a walk over a ring of 4,000
// nodes (640,000 points) or a Maglev table of 65,537 slots.
const scaleNodes = 4000

// usableAtScale accepts 3 of the scaleNodes nodes.
func usableAtScale(i int) bool { return i == 0 || i == scaleNodes/3 || i == 2*scaleNodes/3 }

// TestWalkAsksEachNodeOnceAtScale: at 4,000 nodes a walk for 3 whose
// candidates are nearly all rejected asks accept about each node at most
// once, and one that rejects all stops once it has met every node (it
// used to ask at every position of the ring or table, and scan it whole).
func TestWalkAsksEachNodeOnceAtScale(t *testing.T) {
	r, err := NewRing(equalNodes(scaleNodes), testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMaglev(equalNodes(scaleNodes), testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name string
		succ func(key uint64, dst []int, n int, accept func(int) bool) []int
	}{{"ring", r.Successors}, {"maglev", m.Successors}} {
		t.Run(w.name, func(t *testing.T) {
			asked := make(map[int]int)
			counting := func(i int) bool { asked[i]++; return usableAtScale(i) }
			for k := range 20 {
				clear(asked)
				got := w.succ(keyOf(k), nil, 3, counting)
				if len(got) != 3 {
					t.Fatalf("key %d: got %v, want the 3 accepted nodes", k, got)
				}
				for node, times := range asked {
					if times > 1 {
						t.Fatalf("key %d: accept asked %d times about node %d", k, times, node)
					}
				}
			}
			calls := 0
			if got := w.succ(keyOf(1), nil, 3, func(int) bool { calls++; return false }); len(got) != 0 || calls != scaleNodes {
				t.Errorf("all rejected: got %v after %d accept calls, want none after %d", got, calls, scaleNodes)
			}
		})
	}
}
