package srclimit

import (
	"net/netip"
	"sync/atomic"
	"testing"
)

var benchConfigs = []struct {
	name string
	cfg  Config
}{
	{"conns", Config{MaxConns: 1 << 30}},
	{"rate", Config{Rate: 1e3, Burst: 1 << 30}},
	{"both", Config{MaxConns: 1 << 30, Rate: 1e3, Burst: 1 << 30}},
}

// The benchmark clocks advance 1ns a call and a token is a ms (from a
// bucket of 2³⁰): buckets never fill up again, the sweep finds nothing to
// drop, every call is the path of an existing source.

// BenchmarkAdmitRelease: one source, Admit then Release, from every P at
// once (one shard: the contended case) and from one goroutine.
func BenchmarkAdmitRelease(b *testing.B) {
	for _, c := range benchConfigs {
		b.Run(c.name+"/parallel", func(b *testing.B) {
			l := mustNew(b, c.cfg)
			a := netip.MustParseAddr("192.0.2.1")
			var clock atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				now := clock.Add(1)
				for i := int64(0); pb.Next(); i++ {
					if l.Admit(a, now+i) != Admit {
						b.Fatal("refused")
					}
					l.Release(a)
				}
			})
		})
		b.Run(c.name+"/serial", func(b *testing.B) {
			l := mustNew(b, c.cfg)
			a := netip.MustParseAddr("192.0.2.1")
			b.ReportAllocs()
			for i := range b.N {
				if l.Admit(a, int64(i)) != Admit {
					b.Fatal("refused")
				}
				l.Release(a)
			}
		})
	}
}

// BenchmarkAdmitManySources: each goroutine cycles Admit and Release over
// 4096 sources of its own (existing entries, spread over the shards).
func BenchmarkAdmitManySources(b *testing.B) {
	const perG = 4096
	for _, c := range benchConfigs {
		b.Run(c.name, func(b *testing.B) {
			l := mustNew(b, c.cfg)
			var g atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				base := int(g.Add(1)) * perG
				addrs := make([]netip.Addr, perG)
				for i := range addrs {
					addrs[i] = v6(base + i)
				}
				for i := int64(0); pb.Next(); i++ {
					a := addrs[i%perG]
					if l.Admit(a, i) != Admit {
						b.Fatal("refused")
					}
					l.Release(a)
				}
			})
		})
	}
}

// BenchmarkAdmitNewSources: every call a source never seen, under a flood
// that keeps about 1,000 sources alive (R = 1 ms, one source every µs):
// insertion, sweep and removal, in steady state.
func BenchmarkAdmitNewSources(b *testing.B) {
	l := mustNew(b, Config{MaxConns: 4, Rate: 1000, Burst: 1})
	b.ReportAllocs()
	for i := range b.N {
		a := v6(i)
		if l.Admit(a, int64(i)*1000) != Admit {
			b.Fatal("refused")
		}
		l.Release(a)
	}
	b.ReportMetric(float64(l.Sources()), "sources")
}
