package srclimit

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentHammer: 8 goroutines admit and release on 24 overlapping
// sources (each in both of its forms), on a shared clock. A source never
// has more connections open than the cap, and once everything is released
// no count is left.
func TestConcurrentHammer(t *testing.T) {
	for _, cfg := range []Config{
		{MaxConns: 3},
		{MaxConns: 3, Rate: 2000, Burst: 8},
		{Rate: 5000, Burst: 2},
	} {
		l := mustNew(t, cfg)
		const workers, sources = 8, 24
		var clock atomic.Int64
		var open [sources]atomic.Int32
		var admitted, refused atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 7))
				var held []int
				for range 20_000 {
					now := clock.Add(r.Int64N(20_000)) // up to 20µs a step
					if len(held) > 0 && (r.IntN(2) == 0 || len(held) > 6) {
						j := r.IntN(len(held))
						i := held[j]
						held[j] = held[len(held)-1]
						held = held[:len(held)-1]
						open[i].Add(-1)
						l.Release(addrForm(i, r.IntN(2)))
						continue
					}
					i := r.IntN(sources)
					if l.Admit(addrForm(i, r.IntN(2)), now) != Admit {
						refused.Add(1)
						continue
					}
					admitted.Add(1)
					if n := open[i].Add(1); cfg.MaxConns > 0 && n > int32(cfg.MaxConns) {
						t.Errorf("source %d: %d connections open, cap %d", i, n, cfg.MaxConns)
					}
					if cfg.MaxConns > 0 {
						held = append(held, i)
					} else {
						open[i].Add(-1)
					}
				}
				for _, i := range held {
					open[i].Add(-1)
					l.Release(addrForm(i, 0))
				}
			}()
		}
		wg.Wait()
		if admitted.Load() == 0 || refused.Load() == 0 {
			t.Errorf("%+v: %d admitted, %d refused: the test exercised nothing", cfg, admitted.Load(), refused.Load())
		}
		if n := check(t, l); n != 0 {
			t.Errorf("%+v: %d connections still counted after all were released", cfg, n)
		}
		n := l.Sources()
		if cfg.Rate == 0 && n != 0 {
			t.Errorf("%+v: Sources() = %d with no connection open, want 0", cfg, n)
		}
		if n > sources {
			t.Errorf("%+v: Sources() = %d for %d sources", cfg, n, sources)
		}
		// Once every bucket is full, traffic sweeps every dead entry: a
		// probe source per shard, admitted a few times, is all that is left.
		now := clock.Load() + s1
		probes := probePerShard(l)
		for range 10 {
			for _, p := range probes {
				if l.Admit(p, now) == Admit {
					l.Release(p)
				}
			}
		}
		if n := l.Sources(); cfg.Rate > 0 && n != len(probes) {
			t.Errorf("%+v: Sources() = %d after the refill time and traffic, want the %d probes", cfg, n, len(probes))
		}
	}
}

// addrForm is test source i as IPv4 (form 0) or IPv4-mapped IPv6 (form 1).
func addrForm(i, form int) netip.Addr {
	if form == 1 {
		return netip.AddrFrom16(v4(i).As16())
	}
	return v4(i)
}
