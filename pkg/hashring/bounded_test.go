package hashring

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		name                string
		factor              float64
		total               int64
		weight, totalWeight int
		want                int64
	}{
		{name: "empty pool", factor: 1.25, total: 0, weight: 1, totalWeight: 4, want: 1},
		{name: "rounds up", factor: 1.25, total: 99, weight: 1, totalWeight: 4, want: 32},
		{name: "weighted", factor: 1.5, total: 9, weight: 3, totalWeight: 4, want: 12},
		{name: "no weight", factor: 2, total: 9, weight: 0, totalWeight: 4, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Capacity(tc.factor, tc.total, tc.weight, tc.totalWeight); got != tc.want {
				t.Errorf("Capacity = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLookupBoundedNeverExceedsBound(t *testing.T) {
	// Zipf-skewed keys would pile up on a few nodes; with bounded loads no
	// node ever holds more than ceil(factor × average).
	for _, factor := range []float64{1.05, 1.25, 2} {
		r, err := NewRing(equalNodes(10), testVnodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		load := make([]int64, 10)
		zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.2, 1, 10_000)
		loadOf := func(i int) (int64, bool) { return load[i], true }
		var placed int64
		for range 20_000 {
			node := r.LookupBounded(keyOf(int(zipf.Uint64())), factor, loadOf)
			load[node]++
			placed++
			bound := int64(math.Ceil(factor * float64(placed) / 10))
			if load[node] > bound {
				t.Fatalf("factor %v: node %d has %d after %d placements, bound %d", factor, node, load[node], placed, bound)
			}
		}
		// Without the bound the same keys overload a node, so the test
		// would notice a bound that is not applied.
		plain := make([]int64, 10)
		zipf = rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.2, 1, 10_000)
		for range 20_000 {
			plain[r.Lookup(keyOf(int(zipf.Uint64())))]++
		}
		if peak := maxLoad(plain); float64(peak) <= factor*2000 {
			t.Fatalf("skew too mild: unbounded peak %d", peak)
		}
	}
}

func maxLoad(l []int64) int64 {
	var m int64
	for _, v := range l {
		m = max(m, v)
	}
	return m
}

func TestLookupBoundedSkipsIneligible(t *testing.T) {
	nodes := []Node{{ID: "6", Weight: 1}, {ID: "4", Weight: 1}, {ID: "2", Weight: 1}}
	r, err := NewRing(nodes, 3, decimalHash)
	if err != nil {
		t.Fatal(err)
	}
	// Key 11 belongs to "2" (index 2); with "2" ineligible it goes to "4".
	got := r.LookupBounded(11, 1.25, func(i int) (int64, bool) { return 0, i != 2 })
	if got != 1 {
		t.Errorf("got node %d, want 1", got)
	}
	if got := r.LookupBounded(11, 1.25, func(int) (int64, bool) { return 0, false }); got != -1 {
		t.Errorf("nothing eligible: got %d, want -1", got)
	}
	// Node "2" already past its capacity (ceil(1.25 × 4/3) = 2): next one.
	loads := []int64{0, 0, 3}
	if got := r.LookupBounded(11, 1.25, func(i int) (int64, bool) { return loads[i], true }); got != 1 {
		t.Errorf("owner full: got node %d, want 1", got)
	}
}
