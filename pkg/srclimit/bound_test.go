package srclimit

import (
	"testing"
)

// TestMemoryBound: a million one-off sources, one every microsecond
// (λ = 10⁶/s), each admitted and released, with a bucket that refills in
// R = 1 ms, the last 100 still connected. The sources alive at any instant
// are the last λ·R = 1,000 (those connected are among them); the Limiter
// must hold no more than the guaranteed 2·(L+2) per shard (checked as
// 2·(1,000 + 2·64) in all: shards differ a little around L = 1,000/64),
// however many sources it has seen; a steady flood is expected near 4/3
// of what is alive.
func TestMemoryBound(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const (
		step    = int64(1000) // ns between new sources
		refill  = ms          // Rate 1000, Burst 1
		holding = 100         // connections open at any time
	)
	l := mustNew(t, Config{MaxConns: 4, Rate: 1000, Burst: 1})
	alive := float64(refill / step)
	bound := int(2 * (alive + 2*nShards))
	peak := 0
	for i := range n {
		now := int64(i) * step
		if v := l.Admit(v6(i), now); v != Admit {
			t.Fatalf("source %d: %v", i, v)
		}
		if i >= holding {
			l.Release(v6(i - holding))
		}
		if i%1000 == 999 {
			s := l.Sources()
			peak = max(peak, s)
			if s > bound {
				t.Fatalf("after %d sources: Sources() = %d, bound %d", i+1, s, bound)
			}
			if i+1 >= 10_000 && s < int(alive) {
				t.Fatalf("after %d sources: Sources() = %d, fewer than the %v alive", i+1, s, alive)
			}
		}
	}
	t.Logf("%d sources seen, peak Sources() %d, alive ~%v, bound %d", n, peak, alive, bound)
	if float64(peak) > 1.5*alive {
		t.Errorf("peak %d: a steady flood should stay near 4/3 of the %v alive", peak, alive)
	}
	if n := check(t, l); n != holding {
		t.Fatalf("counts = %d, want %d", n, holding)
	}
}

// TestMemoryBoundNoRate: without a rate limit an entry lives exactly as
// long as its source has connections open.
func TestMemoryBoundNoRate(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const holding = 100
	l := mustNew(t, Config{MaxConns: 1})
	for i := range n {
		if v := l.Admit(v4(i), int64(i)); v != Admit {
			t.Fatalf("source %d: %v", i, v)
		}
		if i >= holding {
			l.Release(v4(i - holding))
		}
		if i%10_000 == 9_999 {
			if s := l.Sources(); s != holding {
				t.Fatalf("after %d sources: Sources() = %d, want %d", i+1, s, holding)
			}
		}
	}
	for i := n - holding; i < n; i++ {
		l.Release(v4(i))
	}
	if s := l.Sources(); s != 0 {
		t.Fatalf("Sources() = %d with nothing open", s)
	}
}

// TestMemoryBoundWaves: waves of new sources at one instant, every R, each
// wave dying whole as the next arrives. After every Admit, its shard is
// within 2·(L_s+2), L_s the most sources of one wave the shard got.
func TestMemoryBoundWaves(t *testing.T) {
	const wave, waves = 6400, 40
	l := mustNew(t, Config{Rate: 1, Burst: 1}) // R = 1s
	var most [nShards]int                      // L_s: the most sources of one wave a shard gets
	for w := range waves {
		var in [nShards]int
		for i := range wave {
			in[l.shardIndex(new(l.key(v6(w*wave+i))))]++
		}
		for si := range most {
			most[si] = max(most[si], in[si])
		}
	}
	peak := 0.0
	for w := range waves {
		for i := range wave {
			a := v6(w*wave + i)
			si := l.shardIndex(new(l.key(a)))
			if v := l.Admit(a, int64(w)*s1); v != Admit {
				t.Fatalf("wave %d source %d: %v", w, i, v)
			}
			n := len(l.shards[si].ents)
			if n > 2*(most[si]+2) {
				t.Fatalf("wave %d: shard %d holds %d, bound 2·(%d+2)", w, si, n, most[si])
			}
			peak = max(peak, float64(n)/float64(most[si]))
		}
	}
	t.Logf("%d waves of %d: Sources() %d, peak shard/L_s %.2f", waves, wave, l.Sources(), peak)
}

// TestSweepAfterFlood: a flood at one instant is held whole while it is
// alive (each entry is an empty bucket), and once its buckets are full the
// sweep empties each shard within ⌈n/(K−1)⌉ Admit calls on it.
func TestSweepAfterFlood(t *testing.T) {
	const n = 64_000
	l := mustNew(t, Config{Rate: 1, Burst: 1})
	for i := range n {
		l.Admit(v4(i), 0)
	}
	if s := l.Sources(); s < n-nShards*sweepPerAdmit || s > n {
		t.Fatalf("Sources() = %d during the flood, want ~%d", s, n)
	}
	largest := 0
	for i := range l.shards {
		largest = max(largest, len(l.shards[i].ents))
	}
	calls := (largest+sweepPerAdmit-2)/(sweepPerAdmit-1) + 1 // ceil(largest/(K-1)), plus the pass in progress
	now := s1
	probes := probePerShard(l)
	for range calls {
		for _, p := range probes {
			l.Admit(p, now)
		}
	}
	if s := l.Sources(); s != nShards {
		t.Fatalf("Sources() = %d after %d calls per shard, want only the %d probes", s, calls, nShards)
	}
}
