package hashring

import (
	"errors"
	"math"
	"testing"
)

func TestMaglevPaperExample(t *testing.T) {
	// Table 1 of the Maglev paper: size 7; B0 offset 3 skip 4, B1 offset 0
	// skip 2, B2 offset 3 skip 1 give B1 B0 B1 B0 B2 B2 B0.
	h := tableHash(map[string]uint64{
		"B0": 3, "B0/skip": 3,
		"B1": 0, "B1/skip": 1,
		"B2": 3, "B2/skip": 0,
	})
	nodes := []Node{{ID: "B2", Weight: 1}, {ID: "B0", Weight: 1}, {ID: "B1", Weight: 1}}
	m, err := NewMaglev(nodes, 7, h)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"B1", "B0", "B1", "B0", "B2", "B2", "B0"}
	for s, w := range want {
		if got := nodes[m.Slot(s)].ID; got != w {
			t.Errorf("slot %d = %s, want %s", s, got, w)
		}
	}
	// Fallbacks are the owners of the following slots: key 4 (B2) -> slot 5
	// (B2 again, skipped) -> slot 6 (B0) -> slot 0 (B1).
	var got []string
	for _, i := range m.Successors(4, nil, 3, nil) {
		got = append(got, nodes[i].ID)
	}
	if !equalStrings(got, []string{"B2", "B0", "B1"}) {
		t.Errorf("Successors(4) = %v, want [B2 B0 B1]", got)
	}
}

func TestMaglevErrors(t *testing.T) {
	one := []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}, {ID: "c", Weight: 1}}
	for _, tc := range []struct {
		name  string
		nodes []Node
		size  int
		want  error
	}{
		{name: "not prime", nodes: one, size: 65536, want: ErrTableSize},
		{name: "one", nodes: one, size: 1, want: ErrTableSize},
		{name: "smaller than nodes", nodes: one, size: 2, want: ErrTableSize},
		{name: "too large", nodes: one, size: 1<<24 + 43, want: ErrTableSize},
		{name: "no nodes", size: 7, want: ErrNoNodes},
		{name: "duplicate", nodes: []Node{{ID: "a", Weight: 1}, {ID: "a", Weight: 1}}, want: ErrDuplicateID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewMaglev(tc.nodes, tc.size, nil); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMaglevDistribution(t *testing.T) {
	const keys = 1_000_000
	m, err := NewMaglev(equalNodes(10), testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := counts(m, 10, keys)
	if r := maxOverMean(c); r > 1.02 {
		t.Errorf("max/mean = %.4f > 1.02 (counts %v)", r, c)
	} else {
		t.Logf("max/mean = %.4f", r)
	}
}

func TestMaglevWeightedShare(t *testing.T) {
	// Slot shares follow weights within 1% (relative); weight 0 owns nothing.
	nodes := []Node{{ID: "a", Weight: 1}, {ID: "b", Weight: 2}, {ID: "c", Weight: 3}, {ID: "d", Weight: 4}, {ID: "z", Weight: 0}}
	m, err := NewMaglev(nodes, testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	slots := make([]int, len(nodes))
	for s := range m.Size() {
		slots[m.Slot(s)]++
	}
	for i, c := range slots {
		want := float64(m.Size()) * float64(nodes[i].Weight) / 10
		if want == 0 {
			if c != 0 {
				t.Errorf("%s (weight 0) owns %d slots", nodes[i].ID, c)
			}
			continue
		}
		if dev := math.Abs(float64(c)-want) / want; dev > 0.01 {
			t.Errorf("%s: %d slots, want %.0f ± 1%%", nodes[i].ID, c, want)
		}
	}
}

func TestMaglevOrderIndependent(t *testing.T) {
	nodes := equalNodes(10)
	nodes[2].Weight = 5
	nodes[5].Weight = 0
	a, err := NewMaglev(nodes, testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := shuffled(nodes, 3)
	b, err := NewMaglev(other, testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	for s := range a.Size() {
		if x, y := nodes[a.Slot(s)].ID, other[b.Slot(s)].ID; x != y {
			t.Fatalf("slot %d: %s vs %s", s, x, y)
		}
	}
}

func TestMaglevRebuildDisruption(t *testing.T) {
	// Removing one of 10 nodes and rebuilding moves at most 1.5 × the ideal
	// tenth of the keys.
	const keys = 1_000_000
	nodes := equalNodes(10)
	full, err := NewMaglev(nodes, testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	const gone = 6
	rest := append(append([]Node(nil), nodes[:gone]...), nodes[gone+1:]...)
	less, err := NewMaglev(rest, testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range keys {
		k := keyOf(i)
		if nodes[full.Lookup(k)].ID != rest[less.Lookup(k)].ID {
			moved++
		}
	}
	frac := float64(moved) / keys
	t.Logf("moved %.4f of keys (ideal 0.1)", frac)
	if frac > 0.15 {
		t.Errorf("moved %.4f of keys, want <= 0.15", frac)
	}
}

// The rule config's advice gives (100 slots per backend): at 1,000
// backends, removing ten (1%) moves keys between the backends that stay
// too, and the fewer slots per backend, the more. Compared slot by slot,
// so the fractions are exact for the table, not sampled.
func TestMaglevMovesFollowSlotsPerBackend(t *testing.T) {
	nodes := equalNodes(1000)
	var rest []Node
	for i, n := range nodes {
		if i%100 != 7 { // ten gone, spread over the list
			rest = append(rest, n)
		}
	}
	moved := func(size int) float64 {
		full, err := NewMaglev(nodes, size, nil)
		if err != nil {
			t.Fatal(err)
		}
		less, err := NewMaglev(rest, size, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for s := range size {
			if nodes[full.Slot(s)].ID != rest[less.Slot(s)].ID {
				n++
			}
		}
		return float64(n) / float64(size)
	}
	small, large := moved(65537), moved(655373)
	t.Logf("1%% of 1,000 backends removed: %.2f%% of keys moved at 65,537 slots, %.2f%% at 655,373 (ideal 1%%)", 100*small, 100*large)
	if large >= small {
		t.Errorf("moves at 655,373 slots (%.4f) not below those at 65,537 (%.4f)", large, small)
	}
	if large > 0.02 {
		t.Errorf("at 100+ slots per backend %.4f of keys moved, want <= 0.02 (twice the ideal)", large)
	}
}
