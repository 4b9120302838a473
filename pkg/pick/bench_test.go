package pick

import (
	"fmt"
	"testing"
)

func BenchmarkPick(b *testing.B) {
	for _, alg := range Algorithms {
		for _, n := range []int{10, 1000} {
			b.Run(fmt.Sprintf("%s/%d", alg, n), func(b *testing.B) {
				st := newState(n)
				p := mustNew(b, equalBackends(n), st, Config{Algorithm: alg})
				dst := make([]int, 0, 3)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					dst = p.Pick(client(i), 3, dst[:0])
				}
			})
		}
	}
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("consistent-hash-bounded/%d", n), func(b *testing.B) {
			st := newState(n)
			p := mustNew(b, equalBackends(n), st, Config{Algorithm: ConsistentHash, HashBalanceFactor: 1.25})
			dst := make([]int, 0, 3)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				dst = p.Pick(client(i), 3, dst[:0])
			}
		})
	}
}

func BenchmarkNew(b *testing.B) {
	for _, alg := range []string{ConsistentHash, Maglev, IPHash} {
		b.Run(fmt.Sprintf("%s/1000", alg), func(b *testing.B) {
			backends, st := equalBackends(1000), newState(1000)
			b.ReportAllocs()
			for b.Loop() {
				mustNew(b, backends, st, Config{Algorithm: alg})
			}
		})
	}
}
