package hashring

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestRingByHand(t *testing.T) {
	// Points: "2" -> 2, 12, 22; "4" -> 4, 14, 24; "6" -> 6, 16, 26.
	nodes := []Node{{ID: "6", Weight: 1}, {ID: "4", Weight: 1}, {ID: "2", Weight: 1}}
	r, err := NewRing(nodes, 3, decimalHash)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[uint64]string{2: "2", 11: "2", 23: "4", 27: "2", 0: "2", 26: "6", 25: "6"}
	for key, want := range owner {
		if got := nodes[r.Lookup(key)].ID; got != want {
			t.Errorf("Lookup(%d) = %q, want %q", key, got, want)
		}
	}
	// Adding "8" (8, 18, 28) takes 27 and nothing else.
	r2, err := NewRing(append(nodes, Node{ID: "8", Weight: 1}), 3, decimalHash)
	if err != nil {
		t.Fatal(err)
	}
	owner[27] = "8"
	for key, want := range owner {
		if got := append(nodes, Node{ID: "8"})[r2.Lookup(key)].ID; got != want {
			t.Errorf("after adding 8: Lookup(%d) = %q, want %q", key, got, want)
		}
	}
}

func TestRingSuccessors(t *testing.T) {
	nodes := []Node{{ID: "6", Weight: 1}, {ID: "4", Weight: 1}, {ID: "2", Weight: 1}, {ID: "9", Weight: 0}}
	r, err := NewRing(nodes, 3, decimalHash)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(idx []int) []string {
		var s []string
		for _, i := range idx {
			s = append(s, nodes[i].ID)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		key    uint64
		n      int
		reject string
		dst    []int
		want   []string
	}{
		{name: "owner then clockwise", key: 11, n: 3, want: []string{"2", "4", "6"}},
		{name: "wraps", key: 25, n: 3, want: []string{"6", "2", "4"}},
		{name: "n bounds the result", key: 11, n: 2, want: []string{"2", "4"}},
		{name: "n larger than nodes", key: 11, n: 10, want: []string{"2", "4", "6"}},
		{name: "rejected owner falls to next", key: 11, n: 3, reject: "2", want: []string{"4", "6"}},
		{name: "skips nodes already in dst", key: 11, n: 1, dst: []int{2}, want: []string{"2", "4"}},
		{name: "zero n", key: 11, n: 0, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Successors(tc.key, tc.dst, tc.n, func(node int) bool { return nodes[node].ID != tc.reject })
			if g := ids(got); !equalStrings(g, tc.want) {
				t.Errorf("got %v, want %v", g, tc.want)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRingErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  error
	}{
		{name: "no nodes", want: ErrNoNodes},
		{name: "empty id", nodes: []Node{{ID: "", Weight: 1}}, want: ErrEmptyID},
		{name: "duplicate", nodes: []Node{{ID: "a", Weight: 1}, {ID: "a", Weight: 2}}, want: ErrDuplicateID},
		{name: "negative weight", nodes: []Node{{ID: "a", Weight: -1}}, want: ErrNegativeWeight},
		{name: "too many points", nodes: []Node{{ID: "a", Weight: MaxRingPoints/testVnodes + 1}}, want: ErrRingTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRing(tc.nodes, testVnodes, nil); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRingAllZeroWeights(t *testing.T) {
	r, err := NewRing([]Node{{ID: "a"}, {ID: "b"}}, testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Lookup(42); got != -1 {
		t.Errorf("Lookup = %d, want -1", got)
	}
	if got := r.Successors(42, nil, 3, nil); len(got) != 0 {
		t.Errorf("Successors = %v, want none", got)
	}
}

func TestRingDistribution(t *testing.T) {
	// Random points give each node a share with a relative standard deviation
	// of about 1/sqrt(vnodes): 7.9% at the default 160, so the largest of 10
	// shares is typically 1.12 × the mean (measured over 20 random ID sets:
	// median 1.125, worst 1.21). 1.10 needs about 1000 points per node
	// (same sets: worst 1.077). Both bounds are asserted.
	const keys = 1_000_000
	for _, tc := range []struct {
		name   string
		vnodes int
		bound  float64
	}{
		{name: "default vnodes, mean + 3 sigma", vnodes: testVnodes, bound: 1.25},
		{name: "1000 vnodes", vnodes: 1000, bound: 1.10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRing(equalNodes(10), tc.vnodes, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := counts(r, 10, keys)
			m := maxOverMean(c)
			t.Logf("max/mean = %.4f", m)
			if m > tc.bound {
				t.Errorf("max/mean = %.4f > %.2f (counts %v)", m, tc.bound, c)
			}
		})
	}
}

func TestRingWeightedShare(t *testing.T) {
	// Four nodes of weights 1..4 on the default 160 points per weight unit:
	// each share is within 15% (relative) of weight/10.
	const keys = 1_000_000
	nodes := []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 2}, {ID: "c", Weight: 3}, {ID: "d", Weight: 4}}
	r, err := NewRing(nodes, testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range counts(r, len(nodes), keys) {
		want := float64(keys) * float64(nodes[i].Weight) / 10
		if dev := math.Abs(float64(c)-want) / want; dev > 0.15 {
			t.Errorf("%s: %d keys, want %.0f ± 15%% (off by %.1f%%)", nodes[i].ID, c, want, 100*dev)
		}
	}
}

func TestRingOrderIndependent(t *testing.T) {
	nodes := equalNodes(10)
	nodes[3].Weight = 3
	nodes[7].Weight = 0
	a, err := NewRing(nodes, testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := shuffled(nodes, 7)
	b, err := NewRing(other, testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100_000 {
		k := keyOf(i)
		if x, y := nodes[a.Lookup(k)].ID, other[b.Lookup(k)].ID; x != y {
			t.Fatalf("key %d: %s vs %s", i, x, y)
		}
	}
}

func TestRingRemovalMovesOnlyItsKeys(t *testing.T) {
	const keys = 200_000
	nodes := equalNodes(10)
	full, err := NewRing(nodes, testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	const gone = 4
	rest := append(append([]Node(nil), nodes[:gone]...), nodes[gone+1:]...)
	less, err := NewRing(rest, testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range keys {
		k := keyOf(i)
		before, after := nodes[full.Lookup(k)].ID, rest[less.Lookup(k)].ID
		if before == after {
			continue
		}
		if before != nodes[gone].ID {
			t.Fatalf("key %d moved from %s to %s, but only %s left", i, before, after, nodes[gone].ID)
		}
		// Its new owner is the old second choice.
		var two [2]int
		if next := nodes[full.Successors(k, two[:0], 2, nil)[1]].ID; after != next {
			t.Fatalf("key %d went to %s, its fallback was %s", i, after, next)
		}
		moved++
	}
	if moved == 0 {
		t.Fatal("no key moved: the test is not testing")
	}
}

func TestWalkStopsOnceEveryNodeWasMet(t *testing.T) {
	r, err := NewRing(equalNodes(50), testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	got := r.Successors(keyOf(1), nil, 3, func(int) bool { calls++; return false })
	if len(got) != 0 || calls != 50 {
		t.Errorf("all rejected: got %v after %d accept calls, want none after 50", got, calls)
	}
}

func TestRingIndexedSearchMatchesBinarySearch(t *testing.T) {
	for _, nodes := range []int{1, 3, 10, 300} {
		r, err := NewRing(equalNodes(nodes), 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys := []uint64{0, math.MaxUint64}
		for i := range 20_000 {
			keys = append(keys, keyOf(i))
		}
		for p := range r.Len() {
			h, _ := r.Point(p)
			keys = append(keys, h, h+1, h-1)
		}
		for _, k := range keys {
			want, _ := slices.BinarySearch(r.hashes, k)
			if want == r.Len() {
				want = 0
			}
			if got := r.search(k); got != want {
				t.Fatalf("%d nodes: search(%d) = %d, want %d", nodes, k, got, want)
			}
		}
	}
}

// Neither structure has a default size: 0 is refused.
func TestZeroSizeRefused(t *testing.T) {
	nodes := equalNodes(3)
	if _, err := NewRing(nodes, 0, nil); !errors.Is(err, ErrVnodes) {
		t.Errorf("NewRing with 0 vnodes: err = %v, want %v", err, ErrVnodes)
	}
	if _, err := NewMaglev(nodes, 0, nil); !errors.Is(err, ErrTableSize) {
		t.Errorf("NewMaglev with size 0: err = %v, want %v", err, ErrTableSize)
	}
}
