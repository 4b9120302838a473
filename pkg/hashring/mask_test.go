package hashring

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMaskNextMatchesScan: after every batch of random Sets, Next finds
// the first position of a node in the set as a scan of the sequence does,
// and Has and Nodes agree with the model, for sets from empty to full.
func TestMaskNextMatchesScan(t *testing.T) {
	const nodes, positions = 300, 70_001 // several summary words, a ragged last word
	r := rand.New(rand.NewPCG(5, 5))
	seq := make([]int32, positions)
	for p := range seq {
		seq[p] = int32(r.IntN(nodes - 1)) // node nodes-1 occurs nowhere
	}
	k := NewMask(seq, nodes)
	in := make([]bool, nodes)
	for i := range nodes - 1 {
		in[i] = true
	}
	for _, density := range []float64{1, 0.5, 0.01, 0, 0.003, 0.9} {
		for i := range nodes {
			in[i] = i < nodes-1 && r.Float64() < density
			k.Set(i, in[i])
		}
		want := 0
		for i := range nodes {
			if k.Has(i) != in[i] {
				t.Fatalf("density %v: Has(%d) = %v, want %v", density, i, !in[i], in[i])
			}
			if in[i] {
				want++
			}
		}
		if k.Nodes() != want {
			t.Fatalf("density %v: Nodes = %d, want %d", density, k.Nodes(), want)
		}
		for range 500 {
			p := r.IntN(positions)
			wantQ := -1
			for d := range positions {
				if q := (p + d) % positions; in[seq[q]] {
					wantQ = q
					break
				}
			}
			if got := k.Next(p); got != wantQ {
				t.Fatalf("density %v: Next(%d) = %d, want %d", density, p, got, wantQ)
			}
		}
	}
}

// TestSuccessorsInMatchesFilteredSuccessors: a walk restricted to a mask
// returns what Successors returns with an accept that also rejects the
// nodes out of the mask: the same nodes in the same order, for masks from
// 3 nodes in to all, with or without nodes already in dst.
func TestSuccessorsInMatchesFilteredSuccessors(t *testing.T) {
	const nodes = 3000
	r, err := NewRing(equalNodes(nodes), 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMaglev(equalNodes(nodes), testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	type walker struct {
		name   string
		mask   *Mask
		succ   func(key uint64, dst []int, n int, accept func(int) bool) []int
		succIn func(key uint64, mask *Mask, dst []int, n int, accept func(int) bool) []int
	}
	rnd := rand.New(rand.NewPCG(7, 7))
	for _, w := range []walker{
		{"ring", r.NewMask(), r.Successors, r.SuccessorsIn},
		{"maglev", m.NewMask(), m.Successors, m.SuccessorsIn},
	} {
		t.Run(w.name, func(t *testing.T) {
			odd := func(i int) bool { return i%2 == 1 }
			for _, in := range []int{3, 40, nodes / 2, nodes} {
				for i := range nodes {
					w.mask.Set(i, i < in)
				}
				inMask := func(i int) bool { return i < in }
				for k := range 30 {
					key := keyOf(k)
					for _, n := range []int{1, 3, 17, nodes} {
						for _, accept := range []func(int) bool{nil, odd} {
							filtered := func(i int) bool { return inMask(i) && (accept == nil || accept(i)) }
							seeded := []int{rnd.IntN(nodes), rnd.IntN(nodes)}
							for _, dst := range [][]int{nil, seeded} {
								got := w.succIn(key, w.mask, slices.Clone(dst), n, accept)
								want := w.succ(key, slices.Clone(dst), n, filtered)
								if !slices.Equal(got, want) {
									t.Fatalf("%d in, key %d, n %d, dst %v: got %v, want %v", in, k, n, dst, got[:min(8, len(got))], want[:min(8, len(want))])
								}
							}
						}
					}
				}
			}
		})
	}
}

// walkerAtScale is a ring or Maglev table of scaleNodes nodes.
type walkerAtScale struct {
	name    string
	succ    func(key uint64, dst []int, n int, accept func(int) bool) []int
	succIn  func(key uint64, mask *Mask, dst []int, n int, accept func(int) bool) []int
	newMask func() *Mask
}

func walkersAtScale(t *testing.T) []walkerAtScale {
	r, err := NewRing(equalNodes(scaleNodes), testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMaglev(equalNodes(scaleNodes), testTableSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	return []walkerAtScale{
		{"ring", r.Successors, r.SuccessorsIn, r.NewMask},
		{"maglev", m.Successors, m.SuccessorsIn, m.NewMask},
	}
}

// TestMaskedWalkCostAtScale: at 4,000 nodes with all but 3 out of the
// mask, a masked walk asks accept only about the 3, returns them in the
// plain walk's order and allocates nothing.
func TestMaskedWalkCostAtScale(t *testing.T) {
	for _, w := range walkersAtScale(t) {
		t.Run(w.name, func(t *testing.T) {
			mask := w.newMask()
			for i := range scaleNodes {
				mask.Set(i, usableAtScale(i))
			}
			calls := 0
			counting := func(i int) bool { calls++; return usableAtScale(i) }
			dst := make([]int, 0, 3)
			for k := range 50 {
				want := w.succ(keyOf(k), nil, 3, usableAtScale)
				calls = 0
				dst = w.succIn(keyOf(k), mask, dst[:0], 3, counting)
				if !slices.Equal(dst, want) || calls != 3 {
					t.Fatalf("key %d: masked walk returned %v after %d accept calls, want %v after 3", k, dst, calls, want)
				}
			}
			if allocs := testing.AllocsPerRun(100, func() { dst = w.succIn(keyOf(9), mask, dst[:0], 3, usableAtScale) }); allocs != 0 {
				t.Errorf("%v allocations per masked walk", allocs)
			}
		})
	}
}

func TestMaskOfAnotherStructurePanics(t *testing.T) {
	a, err := NewRing(equalNodes(10), testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRing(equalNodes(10), testVnodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a walk over b with a's mask did not panic")
		}
	}()
	b.SuccessorsIn(1, a.NewMask(), nil, 3, nil)
}

// TestWalkMeetsEveryNodeOfAMaskChangedUnderIt: the mask's one writer does
// not wait for readers, so a walk may meet a node that then leaves the
// mask while another comes in. The walk must not count the one that left
// towards "every node met": a node in the mask throughout is still met.
func TestWalkMeetsEveryNodeOfAMaskChangedUnderIt(t *testing.T) {
	const nodes = 50
	r, err := NewRing(equalNodes(nodes), 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	for key := range uint64(20) {
		m := r.NewMask()
		for i := range nodes {
			m.Set(i, false)
		}
		// Three nodes in; when the walk meets the second one, it leaves
		// and a fourth comes in, as a writer's two Sets would do.
		order := r.Successors(key*7919, nil, nodes, nil)
		in := []int{order[0], order[10], order[20]}
		added := order[30]
		for _, i := range in {
			m.Set(i, true)
		}
		asked := map[int]bool{}
		r.SuccessorsIn(key*7919, m, nil, 3, func(node int) bool {
			asked[node] = true
			if node == in[1] {
				m.Set(in[1], false)
				m.Set(added, true)
			}
			return false // all rejected: the walk must go on to meet them all
		})
		for _, i := range []int{in[0], in[2], added} {
			if !asked[i] {
				t.Fatalf("key %d: node %d, in the mask at the walk's end, never met (met %v)", key, i, asked)
			}
		}
	}
}
