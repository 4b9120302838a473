package pool_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/pick"
	"github.com/l4lb/l4lb/pkg/pool"
)

// BenchmarkPlan is the pool's side of one client's dial on a pool of
// 1,000 primaries: alone, beside 1,000 backups, and with the backups
// serving (every primary disabled). Which set serves is a count read in
// O(1), so the three should cost about the same.
func BenchmarkPlan(b *testing.B) {
	for _, algo := range []string{pick.RoundRobin, pick.LeastConn, pick.Maglev} {
		for _, mode := range []string{"alone", "beside-backups", "backups-serving"} {
			b.Run(algo+"/"+mode, func(b *testing.B) {
				var text strings.Builder
				fmt.Fprintf(&text, "[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:1\"\npool = \"p\"\n[pool.p]\nalgorithm = %q\n[pool.p.health]\nenabled = false\n", algo)
				for i := range 1000 {
					fmt.Fprintf(&text, "[[pool.p.backend]]\naddr = \"10.0.%d.%d:80\"\n", i/250, i%250+1)
				}
				if mode != "alone" {
					for i := range 1000 {
						fmt.Fprintf(&text, "[[pool.p.backend]]\naddr = \"10.1.%d.%d:80\"\nbackup = true\n", i/250, i%250+1)
					}
				}
				p, err := pool.New(parse(b, text.String()).Pools["p"], pool.Deps{Store: breaker.NewMemoryStore(nil)})
				if err != nil {
					b.Fatal(err)
				}
				if mode == "backups-serving" {
					for _, be := range p.Backends()[:1000] {
						p.Disable(context.Background(), be)
					}
				}
				var buf [pool.MaxCandidates]int
				src := netip.MustParseAddrPort("192.0.2.1:40000")
				b.ResetTimer()
				for i := range b.N {
					src = netip.AddrPortFrom(src.Addr(), uint16(i))
					if cands, force := p.Plan(src, buf[:0]); len(cands) == 0 || force {
						b.Fatalf("plan %v force %v", cands, force)
					}
				}
			})
		}
	}
}
