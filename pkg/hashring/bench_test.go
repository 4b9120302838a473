package hashring

import (
	"fmt"
	"testing"
)

func BenchmarkRing(b *testing.B) {
	for _, n := range []int{10, 1000} {
		r, err := NewRing(equalNodes(n), testVnodes, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Lookup/%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				r.Lookup(keyOf(i))
			}
		})
		b.Run(fmt.Sprintf("Successors3/%d", n), func(b *testing.B) {
			dst := make([]int, 0, 3)
			for i := 0; b.Loop(); i++ {
				dst = r.Successors(keyOf(i), dst[:0], 3, nil)
			}
		})
		b.Run(fmt.Sprintf("Build/%d", n), func(b *testing.B) {
			nodes := equalNodes(n)
			for b.Loop() {
				if _, err := NewRing(nodes, testVnodes, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMaglev(b *testing.B) {
	for _, n := range []int{10, 1000} {
		m, err := NewMaglev(equalNodes(n), testTableSize, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Lookup/%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				m.Lookup(keyOf(i))
			}
		})
		b.Run(fmt.Sprintf("Successors3/%d", n), func(b *testing.B) {
			dst := make([]int, 0, 3)
			for i := 0; b.Loop(); i++ {
				dst = m.Successors(keyOf(i), dst[:0], 3, nil)
			}
		})
		b.Run(fmt.Sprintf("Build/%d", n), func(b *testing.B) {
			nodes := equalNodes(n)
			for b.Loop() {
				if _, err := NewMaglev(nodes, testTableSize, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
