package pick

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
	// All but 3 backends unusable: the hashing walks meet mostly rejected
	// candidates, which must not make a pick cost in proportion to the pool.
	for _, v := range []struct {
		name   string
		alg    string
		factor float64
	}{
		{IPHash, IPHash, 0},
		{ConsistentHash, ConsistentHash, 0},
		{"consistent-hash-bounded", ConsistentHash, 1.25},
		{Maglev, Maglev, 0},
	} {
		for _, n := range []int{10, 1000, 4000} {
			b.Run(fmt.Sprintf("%s-all-but-3-down/%d", v.name, n), func(b *testing.B) {
				st := allButThreeDown(n)
				p := mustNew(b, equalBackends(n), st, Config{Algorithm: v.alg, HashBalanceFactor: v.factor})
				dst := make([]int, 0, 3)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if dst = p.Pick(client(i), 3, dst[:0]); len(dst) != 3 {
						b.Fatalf("picked %v, want the 3 usable backends", dst)
					}
				}
			})
		}
	}
}

// allButThreeDown is a pool of n whose only usable backends are 0, n/3
// and 2n/3.
func allButThreeDown(n int) *fakeState {
	st := newState(n)
	for i := range n {
		st.down[i].Store(i != 0 && i != n/3 && i != 2*n/3)
	}
	return st
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

// BenchmarkPickScale measures one Pick (a chosen backend and two
// fallbacks, as a pool with retries = 2 asks) against pool size, for every
// algorithm, on a realistic pool: one backend in 50 unusable, Active spread
// over 0..40, and connections coming and going as picks are made (the
// chosen backend gains one, a random backend loses one), so that the
// load-ordered pickers see churn. The "notified" rows tell the picker about
// every change through Changed, as a pool that calls the hook does; the
// others leave it to poll. The "mixed-weights" rows give the backends
// random weights in 1..256 (as many distinct weights as there can be)
// instead of 1.
func BenchmarkPickScale(b *testing.B) {
	type variant struct {
		name     string
		alg      string
		factor   float64
		notified bool
		mixed    bool
	}
	var variants []variant
	for _, alg := range Algorithms {
		variants = append(variants, variant{name: alg, alg: alg})
		if alg == ConsistentHash {
			variants = append(variants, variant{name: "consistent-hash-bounded", alg: alg, factor: 1.25})
		}
	}
	for _, v := range slices.Clone(variants) {
		if v.alg == LeastConn || v.alg == WeightedRoundRobin || v.factor != 0 {
			v.name += "-notified"
			v.notified = true
			variants = append(variants, v)
			if v.factor == 0 {
				v.name += "-mixed-weights"
				v.mixed = true
				variants = append(variants, v)
			}
		}
	}
	for _, v := range variants {
		for _, n := range []int{10, 100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", v.name, n), func(b *testing.B) {
				st := benchState(n)
				cfg := Config{Algorithm: v.alg, HashBalanceFactor: v.factor}
				if v.notified {
					setNotified(&cfg)
				}
				backends := equalBackends(n)
				if v.mixed {
					r := rand.New(rand.NewPCG(1, 1))
					for i := range backends {
						backends[i].Weight = 1 + r.IntN(256)
					}
				}
				p := mustNew(b, backends, st, cfg)
				hook, _ := p.(interface{ Changed(int) })
				if !v.notified {
					hook = nil
				}
				dst := make([]int, 0, 3)
				x := uint64(0x9e3779b97f4a7c15)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					dst = p.Pick(client(i), 3, dst[:0])
					if len(dst) > 0 {
						st.active[dst[0]].Add(1)
						if hook != nil {
							hook.Changed(dst[0])
						}
					}
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					if j := int(x % uint64(n)); st.active[j].Load() > 0 {
						st.active[j].Add(-1)
						if hook != nil {
							hook.Changed(j)
						}
					}
				}
			})
		}
	}
}

// benchState is a pool in service: one backend in 50 unusable, loads
// spread over 0..40.
func benchState(n int) *fakeState {
	st := newState(n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range n {
		st.active[i].Store(int64(r.IntN(41)))
		if i%50 == 17 {
			st.down[i].Store(true)
		}
	}
	return st
}

func setNotified(cfg *Config) { cfg.Notified = true }
