package pool_test

import (
	"fmt"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/pool"
)

// BenchmarkReloadPool is a reload of one pool of N backends: the new pool
// built from the old one, and the old one handing its backends over. Its
// cost per backend must not grow with N (it did: each backend looked its
// predecessor up by a scan of the old pool).
func BenchmarkReloadPool(b *testing.B) {
	for _, n := range []int{100, 1000, 6000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			addrs := make([]string, n)
			for i := range addrs {
				addrs[i] = fmt.Sprintf("127.0.%d.%d:%d", i/250, i%250+1, 1000+i%1000)
			}
			cfg := parse(b, poolTOML(b, addrs, "[pool.p.health]\nenabled = false\n"))
			store := breaker.NewMemoryStore(nil)
			prev, err := pool.New(cfg.Pools["p"], pool.Deps{Store: store})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				next, err := pool.New(cfg.Pools["p"], pool.Deps{Store: store, Previous: prev})
				if err != nil {
					b.Fatal(err)
				}
				prev.HandOver(next)
				prev = next
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/backend")
		})
	}
}
