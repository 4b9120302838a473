package pick

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/hashring"
)

// The load- and weight-ordered pickers (least-conn, weighted-round-robin,
// bounded consistent-hash) against the scans they replaced.

// scanWRR is the O(n) smooth weighted round robin this package had before
// the weight classes: the reference for the sequence.
type scanWRR struct {
	common
	current []int64
}

func (p *scanWRR) Pick(n int, dst []int) []int {
	now := p.clock()
	from := len(dst)
	best := -1
	var total int64
	for i := range p.weights {
		if !p.usable(i) {
			continue
		}
		w := p.effectiveWeight(i, now)
		p.current[i] += w
		total += w
		if best < 0 || p.current[i] > p.current[best] {
			best = i
		}
	}
	if best < 0 {
		return dst
	}
	p.current[best] -= total
	dst = append(dst, best)
	for len(dst)-from < n {
		next := -1
		for i := range p.weights {
			if p.usable(i) && !contains(dst[from:], i) && (next < 0 || p.current[i] > p.current[next]) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		dst = append(dst, next)
	}
	return dst
}

func newCommon(backends []Backend, st State) common {
	c := common{st: st, weights: make([]int32, len(backends)), now: time.Now, rand: rand.Uint64}
	for i, b := range backends {
		c.weights[i] = int32(b.Weight)
	}
	return c
}

func randomBackends(r *rand.Rand, n, maxWeight int) []Backend {
	b := make([]Backend, n)
	for i := range b {
		b[i] = Backend{ID: fmt.Sprintf("b%d", i), Weight: r.IntN(maxWeight + 1)}
	}
	return b
}

// TestSmoothWRRMatchesScan: the classes give nginx's sequence, fallbacks
// included, pick for pick, for random weights and usability that changes
// between picks (told through Changed, or found by polling in pools small
// enough to be polled whole).
func TestSmoothWRRMatchesScan(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 11))
		size := 1 + r.IntN(40)
		maxWeight := []int{1, 3, 10, 256}[seed%4]
		backends := randomBackends(r, size, maxWeight)
		notified := size > pollBudget || seed%2 == 0
		t.Run(fmt.Sprintf("seed%d/n%d/w%d/notified=%v", seed, size, maxWeight, notified), func(t *testing.T) {
			st := newState(size)
			for i := range size {
				st.down[i].Store(r.IntN(5) == 0)
			}
			p := mustNew(t, backends, st, Config{Algorithm: WeightedRoundRobin, Notified: notified}).(*weightedRoundRobin)
			if seed%5 == 0 {
				// Fold the gains into the keys a thousand picks in.
				p.round = foldLimit - 1000
				for _, c := range p.classes {
					c.base = c.w * p.round
				}
			}
			ref := &scanWRR{common: newCommon(backends, st), current: make([]int64, size)}
			for k := range 3000 {
				n := 1 + r.IntN(4)
				if k%50 == 49 {
					n = size + 1
				}
				got, want := p.Pick(client(0), n, nil), ref.Pick(n, nil)
				if !slices.Equal(got, want) {
					t.Fatalf("pick %d (n=%d): got %v, want %v", k, n, got, want)
				}
				if r.IntN(10) == 0 {
					i := r.IntN(size)
					st.down[i].Store(!st.down[i].Load())
					if notified {
						p.Changed(i)
					}
				}
			}
			for i := range size {
				if got, want := p.current(i), ref.current[i]; p.weights[i] > 0 && got != want {
					t.Errorf("backend %d: current %d, want %d", i, got, want)
				}
			}
			checkWRR(t, p)
		})
	}
}

// TestSmoothWRRFindsUnusableInPick: in a pool too large to poll whole and
// not notified, a backend that goes down just before the pick that would
// choose it (as winner or as a fallback) is found by that pick, which then
// comes out exactly as the scan's: it sat the pick out.
func TestSmoothWRRFindsUnusableInPick(t *testing.T) {
	const size = 60
	r := rand.New(rand.NewPCG(1, 2))
	backends := randomBackends(r, size, 6)
	for i := range backends {
		backends[i].Weight++ // no weight 0: every backend takes part
	}
	for _, role := range []int{0, 1, 2} { // winner, first or second fallback
		t.Run(fmt.Sprint("candidate", role), func(t *testing.T) {
			st := newState(size)
			p := mustNew(t, backends, st, Config{Algorithm: WeightedRoundRobin}).(*weightedRoundRobin)
			ref := &scanWRR{common: newCommon(backends, st), current: make([]int64, size)}
			found := 0
			for k := range 2000 {
				// What would the next pick return? Ask a copy of the scan.
				peek := &scanWRR{common: ref.common, current: slices.Clone(ref.current)}
				victim := peek.Pick(3, nil)[role]
				p.mu.Lock()
				polled := (victim-p.cursor+size)%size < p.polls
				p.mu.Unlock()
				st.down[victim].Store(true)
				got, want := p.Pick(client(0), 3, nil), ref.Pick(3, nil)
				if !slices.Equal(got, want) {
					t.Fatalf("pick %d (victim %d): got %v, want %v", k, victim, got, want)
				}
				for i := range size {
					if p.current(i) != ref.current[i] {
						t.Fatalf("pick %d (victim %d): backend %d current %d, want %d", k, victim, i, p.current(i), ref.current[i])
					}
				}
				if !polled {
					found++
				}
				// Back up, and the picker told (else it would wait for
				// the poll, and the scan would not).
				st.down[victim].Store(false)
				p.Changed(victim)
			}
			if found == 0 {
				t.Fatal("every victim was polled before the pick: nothing tested")
			}
		})
	}
}

// TestSmoothWRRNginxSequences spells out nginx's sequence for small
// weights, as the issue asks.
func TestSmoothWRRNginxSequences(t *testing.T) {
	for _, tc := range []struct {
		weights []int
		want    string
	}{
		{[]int{5, 1, 1}, "aabacaa"},
		{[]int{1, 1, 1}, "abc"},
		{[]int{2, 1}, "aba"},
		{[]int{3, 2}, "ababa"},
		{[]int{4, 3, 2}, "abcabacba"},
		{[]int{1, 2, 3}, "cbacbc"},
		{[]int{5, 5, 1}, "ababcababab"},
	} {
		backends := make([]Backend, len(tc.weights))
		for i, w := range tc.weights {
			backends[i] = Backend{ID: string(rune('a' + i)), Weight: w}
		}
		p := mustNew(t, backends, newState(len(backends)), Config{Algorithm: WeightedRoundRobin})
		var got []byte
		for range 3 * len(tc.want) {
			got = append(got, backends[p.Pick(client(0), 1, nil)[0]].ID[0])
		}
		if want := tc.want + tc.want + tc.want; string(got) != want {
			t.Errorf("weights %v: %s, want %s", tc.weights, got, want)
		}
	}
}

// checkWRR verifies the classes: every usable weighted backend in the
// class of its weight, heaps ordered, totals summed.
func checkWRR(t *testing.T, p *weightedRoundRobin) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var total int64
	members := 0
	for k, c := range p.classes {
		if c.at != k || c.members != len(c.heap) || c.members == 0 {
			t.Fatalf("class %d: at %d, members %d, heap %d", k, c.at, c.members, len(c.heap))
		}
		for j, i := range c.heap {
			if p.class[i] != c || int(p.hpos[i]) != j {
				t.Fatalf("backend %d: class or position wrong", i)
			}
			if j > 0 && p.before(i, c.heap[(j-1)/2]) {
				t.Fatalf("class %d: heap order broken at %d", c.w, j)
			}
		}
		total += c.w * int64(c.members)
		members += c.members
	}
	inClass := 0
	for i := range p.weights {
		if p.class[i] != nil {
			inClass++
		}
	}
	if total != p.total || members != inClass {
		t.Fatalf("total %d, classes sum to %d; %d backends in classes, heaps hold %d", p.total, total, inClass, members)
	}
}

// loadKey is (active+1)/weight as a comparable pair.
type loadKey struct{ load, weight int64 }

func (a loadKey) cmp(b loadKey) int { return cmp.Compare(a.load*b.weight, b.load*a.weight) }

// bestKeys returns the keys of the n best usable backends, by a scan.
func bestKeys(c *common, n int) []loadKey {
	var keys []loadKey
	for i := range c.weights {
		if c.usable(i) {
			keys = append(keys, loadKey{c.st.Active(i) + 1, c.effectiveWeight(i, c.clock())})
		}
	}
	slices.SortFunc(keys, loadKey.cmp)
	return keys[:min(n, len(keys))]
}

// TestLeastConnMatchesScan: under random changes of load and usability,
// each pick's candidates are the best by (active+1)/weight that a scan
// finds, in order (which of equal backends comes first is the picker's
// business). Notified pickers are exact at any size; unnotified ones in
// pools they poll whole.
func TestLeastConnMatchesScan(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 12))
		size := 1 + r.IntN(300)
		notified := true
		if seed%3 == 0 {
			size, notified = 1+r.IntN(pollBudget), false
		}
		maxWeight := []int{1, 5, 256}[seed%3]
		backends := randomBackends(r, size, maxWeight)
		t.Run(fmt.Sprintf("seed%d/n%d/w%d/notified=%v", seed, size, maxWeight, notified), func(t *testing.T) {
			st := newState(size)
			for i := range size {
				st.active[i].Store(int64(r.IntN(20)))
				st.down[i].Store(r.IntN(6) == 0)
			}
			p := mustNew(t, backends, st, Config{Algorithm: LeastConn, Notified: notified}).(*leastConn)
			for k := range 1500 {
				n := 1 + r.IntN(4)
				got := p.Pick(client(0), n, nil)
				want := bestKeys(&p.common, n)
				if len(got) != len(want) {
					t.Fatalf("pick %d: got %v, want %d candidates", k, got, len(want))
				}
				for j, i := range got {
					if !p.usable(i) || contains(got[:j], i) {
						t.Fatalf("pick %d: %v: %d unusable or repeated", k, got, i)
					}
					if key := (loadKey{st.Active(i) + 1, p.effectiveWeight(i, time.Time{})}); key.cmp(want[j]) != 0 {
						t.Fatalf("pick %d: candidate %d is %d with %v, want %v", k, j, i, key, want[j])
					}
				}
				// The winner's connection opens; others come and go.
				if len(got) > 0 && r.IntN(2) == 0 {
					st.active[got[0]].Add(1)
					if notified {
						p.Changed(got[0])
					}
				}
				for range r.IntN(3) {
					i := r.IntN(size)
					switch {
					case r.IntN(8) == 0:
						st.down[i].Store(!st.down[i].Load())
					case st.active[i].Load() > 0 && r.IntN(2) == 0:
						st.active[i].Add(-1)
					default:
						st.active[i].Add(1)
					}
					if notified {
						p.Changed(i)
					}
				}
			}
			checkLeastConn(t, p)
		})
	}
}

// TestLeastConnUnnotifiedRises: loads that only rise and backends that only
// go down are caught by the pick itself, at any size: without notification
// or polling the candidates are still exactly a scan's best.
func TestLeastConnUnnotifiedRises(t *testing.T) {
	const size = 1000
	r := rand.New(rand.NewPCG(5, 5))
	backends := randomBackends(r, size, 8)
	st := newState(size)
	for i := range size {
		st.active[i].Store(int64(r.IntN(30)))
	}
	p := mustNew(t, backends, st, Config{Algorithm: LeastConn}).(*leastConn)
	p.polls = 0 // nothing but what the pick itself reads
	for k := range 2000 {
		n := 1 + r.IntN(4)
		got := p.Pick(client(0), n, nil)
		want := bestKeys(&p.common, n)
		if len(got) != len(want) {
			t.Fatalf("pick %d: got %v, want %d candidates", k, got, len(want))
		}
		for j, i := range got {
			if key := (loadKey{st.Active(i) + 1, p.fullWeight(i)}); key.cmp(want[j]) != 0 {
				t.Fatalf("pick %d: candidate %d is %d with %v, want %v", k, j, i, key, want[j])
			}
		}
		st.active[got[0]].Add(1)
		for range 2 {
			st.active[r.IntN(size)].Add(int64(r.IntN(3)))
		}
		if r.IntN(50) == 0 {
			st.down[r.IntN(size)].Store(true)
		}
	}
	checkLeastConn(t, p)
}

// TestLeastConnPollsUnnotified: without Changed, a backend whose load
// drops is seen within one round of polling, however large the pool.
func TestLeastConnPollsUnnotified(t *testing.T) {
	const size = 1000
	st := newState(size)
	for i := range size {
		st.active[i].Store(10)
	}
	p := mustNew(t, equalBackends(size), st, Config{Algorithm: LeastConn}).(*leastConn)
	st.active[777].Store(0)
	picks := 0
	for p.Pick(client(0), 1, nil)[0] != 777 {
		if picks++; picks > size/pollBudget+1 {
			t.Fatalf("backend 777 at load 0 not picked after %d picks", picks)
		}
	}
	// A backend taken out is never returned, found at once.
	st.down[777].Store(true)
	for range 100 {
		if got := p.Pick(client(0), 3, nil); slices.Contains(got, 777) {
			t.Fatalf("unusable backend returned: %v", got)
		}
	}
}

// TestLeastConnTiesRotate: equal backends take turns, the chosen one going
// behind the others.
func TestLeastConnTiesRotate(t *testing.T) {
	st := newState(4)
	p := mustNew(t, equalBackends(4), st, Config{Algorithm: LeastConn})
	var got []int
	for range 8 {
		got = p.Pick(client(0), 1, got)
	}
	slices.Sort(got)
	if want := []int{0, 0, 1, 1, 2, 2, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("8 picks over 4 idle backends gave %v, want each twice", got)
	}
}

// checkLeastConn verifies the heap: positions consistent, order kept, every
// usable weighted backend in it once.
func checkLeastConn(t *testing.T, p *leastConn) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for j, i := range p.heap {
		if int(p.pos[i]) != j {
			t.Fatalf("heap[%d] = %d, pos %d", j, i, p.pos[i])
		}
		if j > 0 && p.less(i, p.heap[(j-1)/2]) {
			t.Fatalf("heap order broken at %d", j)
		}
	}
	in := 0
	for i := range p.weights {
		if p.pos[i] >= 0 {
			in++
			if p.weights[i] == 0 {
				t.Fatalf("weight-0 backend %d in the heap", i)
			}
		}
	}
	if in != len(p.heap) {
		t.Fatalf("%d backends claim a position, heap holds %d", in, len(p.heap))
	}
}

// TestBoundedTotalsTrackState: the totals the bounded-load ring works from
// equal a scan's after every pick when every change is notified (and in
// pools polled whole when none is).
func TestBoundedTotalsTrackState(t *testing.T) {
	for _, tc := range []struct {
		size     int
		notified bool
	}{{12, false}, {500, true}} {
		t.Run(fmt.Sprintf("n%d/notified=%v", tc.size, tc.notified), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, uint64(tc.size)))
			backends := randomBackends(r, tc.size, 4)
			st := newState(tc.size)
			p := mustNew(t, backends, st, Config{Algorithm: ConsistentHash, HashBalanceFactor: 1.5, Notified: tc.notified}).(*consistentHash)
			for k := range 5000 {
				got := p.Pick(client(k), 2, nil)
				var total int64
				var weight int
				for i, w := range p.weights {
					if w > 0 && st.Usable(i) {
						total += st.Active(i)
						weight += int(w)
					}
				}
				if a, w := p.loads.totals(); a != total || w != weight {
					t.Fatalf("pick %d: totals %d/%d, scan %d/%d", k, a, w, total, weight)
				}
				if len(got) > 0 {
					if c := hashring.Capacity(p.factor, total, int(p.weights[got[0]]), weight); st.Active(got[0]) >= c {
						t.Fatalf("pick %d: %d at %d, capacity %d", k, got[0], st.Active(got[0]), c)
					}
					st.active[got[0]].Add(1)
					if tc.notified {
						p.Changed(got[0])
					}
				}
				i := r.IntN(tc.size)
				switch {
				case r.IntN(20) == 0:
					st.down[i].Store(!st.down[i].Load())
				case st.active[i].Load() > 0:
					st.active[i].Add(-1)
				}
				if tc.notified {
					p.Changed(i)
				}
			}
		})
	}
}

// TestBoundedLoadAtScale is TestBoundedLoadUnderZipf with 1000 backends and
// a notifying pool: no backend ever goes over ceil(factor × average).
func TestBoundedLoadAtScale(t *testing.T) {
	const factor, n, placements = 1.25, 1000, 100_000
	st := newState(n)
	p := mustNew(t, equalBackends(n), st, Config{Algorithm: ConsistentHash, HashBalanceFactor: factor, Notified: true}).(*consistentHash)
	src := rand.New(rand.NewPCG(4, 2))
	zipf := rand.NewZipf(src, 1.1, 1, 50_000)
	dst := make([]int, 0, 3)
	var total int64
	for k := range placements {
		dst = p.Pick(client(int(zipf.Uint64())), 3, dst[:0])
		load := st.active[dst[0]].Add(1)
		p.Changed(dst[0])
		total++
		if bound := int64(math.Ceil(factor * float64(total) / n)); load > bound {
			t.Fatalf("placement %d: backend %d at %d, bound %d", k, dst[0], load, bound)
		}
		if victim := src.IntN(n); src.IntN(3) == 0 && st.active[victim].Load() > 0 {
			st.active[victim].Add(-1)
			p.Changed(victim)
			total--
		}
	}
}

// TestIPHashIndexMatchesSearch: the bucket index finds the same slot as a
// binary search over all positions, for skewed weights.
func TestIPHashIndexMatchesSearch(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 5))
		size := 1 + r.IntN(500)
		backends := randomBackends(r, size, []int{1, 2, 256}[seed%3])
		if seed%4 == 0 {
			for i := range backends {
				backends[i].Weight = []int{1, 256}[r.IntN(2)]
			}
		}
		p := newIPHash(newCommon(backends, newState(size)), backends, false)
		if p.total == 0 {
			continue
		}
		for range 20_000 {
			key := r.Uint64()
			want, _ := slices.BinarySearchFunc(p.ends, key%p.total+1, cmp.Compare[uint64])
			if got := p.slot(key); got != want {
				t.Fatalf("seed %d: key %d (x %d): slot %d, want %d", seed, key, key%p.total, got, want)
			}
		}
	}
}

// TestChangesQueue: every Changed is seen by a drain after it, each index
// at most once per drain, with producers racing the consumer.
func TestChangesQueue(t *testing.T) {
	const size, producers, each = 64, 4, 20_000
	c := newChanges(size)
	var sent [size]int64
	var seen [size]int64
	var wg sync.WaitGroup
	var stop sync.WaitGroup
	stop.Add(1)
	done := make(chan struct{})
	go func() {
		defer stop.Done()
		for {
			batch := map[int]bool{}
			c.drain(func(i int) {
				if batch[i] {
					t.Errorf("index %d twice in one drain", i)
				}
				batch[i] = true
				seen[i]++
			})
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	var counts [producers][size]int64
	for g := range producers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range each {
				i := r.IntN(size)
				counts[g][i]++
				c.Changed(i)
			}
		})
	}
	wg.Wait()
	close(done)
	stop.Wait()
	// Whatever is still queued goes to the last drain.
	c.drain(func(i int) { seen[i]++ })
	for i := range size {
		for g := range producers {
			sent[i] += counts[g][i]
		}
		if sent[i] > 0 && seen[i] == 0 {
			t.Errorf("index %d changed %d times, never drained", i, sent[i])
		}
		if c.dirty[i].Load() {
			t.Errorf("index %d still marked after the last drain", i)
		}
	}
	c.Changed(-1)
	c.Changed(size)
}

// TestStructuresConcurrent hammers the three structures from several
// goroutines that pick, open and close connections, flap backends and
// notify, then checks their invariants; run with -race.
func TestStructuresConcurrent(t *testing.T) {
	const size, goroutines, picks = 300, 6, 3000
	for _, tc := range []struct {
		alg      string
		factor   float64
		notified bool
	}{
		{LeastConn, 0, true}, {LeastConn, 0, false},
		{WeightedRoundRobin, 0, true}, {WeightedRoundRobin, 0, false},
		{ConsistentHash, 1.25, true}, {ConsistentHash, 1.25, false},
	} {
		t.Run(fmt.Sprintf("%s/notified=%v", tc.alg, tc.notified), func(t *testing.T) {
			r := rand.New(rand.NewPCG(8, 8))
			backends := randomBackends(r, size, 3)
			st := newState(size)
			start := time.Now()
			for i := range size {
				if i%7 == 0 {
					st.since[i].Store(start.UnixNano())
				}
			}
			p := mustNew(t, backends, st, Config{Algorithm: tc.alg, HashBalanceFactor: tc.factor, SlowStart: 50 * time.Millisecond, Notified: tc.notified})
			hook := p.(Notified)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 9))
					dst := make([]int, 0, 4)
					for k := range picks {
						dst = p.Pick(netip.AddrPortFrom(client(k).Addr(), uint16(g)), 1+r.IntN(4), dst[:0])
						for j, i := range dst {
							if backends[i].Weight == 0 || slices.Contains(dst[:j], i) {
								t.Errorf("bad pick %v", dst)
								return
							}
						}
						if len(dst) > 0 {
							st.active[dst[0]].Add(1)
							hook.Changed(dst[0])
						}
						i := r.IntN(size)
						if r.IntN(10) == 0 {
							st.down[i].Store(!st.down[i].Load())
							if r.IntN(2) == 0 {
								st.since[i].Store(time.Now().UnixNano())
							}
						} else if st.active[i].Add(-1) < 0 {
							st.active[i].Add(1)
						}
						hook.Changed(i)
						if k%500 == 0 {
							if got := p.Order(client(k), nil); len(got) != countWeighted(backends) {
								t.Errorf("Order lists %d backends", len(got))
							}
						}
					}
				})
			}
			wg.Wait()
			// One more pick absorbs the last notifications.
			p.Pick(client(0), 1, nil)
			switch q := p.(type) {
			case *leastConn:
				checkLeastConn(t, q)
			case *weightedRoundRobin:
				checkWRR(t, q)
			case *consistentHash:
				if !tc.notified {
					break
				}
				var total int64
				for i := range size {
					total += q.loads.active[i].Load()
				}
				if a, _ := q.loads.totals(); a != total {
					t.Errorf("total %d, contributions sum to %d", a, total)
				}
			}
		})
	}
}

func countWeighted(backends []Backend) int {
	n := 0
	for _, b := range backends {
		if b.Weight > 0 {
			n++
		}
	}
	return n
}

// TestStructuresSlowStart: ramping backends get their share by their
// ramped weight in pools too large to poll whole.
func TestStructuresSlowStart(t *testing.T) {
	const size, window = 200, 10 * time.Second
	t0 := time.Unix(1_000_000, 0)
	now := t0.Add(5 * time.Second) // half way: half the weight
	for _, alg := range []string{WeightedRoundRobin, LeastConn} {
		t.Run(alg, func(t *testing.T) {
			st := newState(size)
			for i := range size / 2 {
				st.since[i].Store(t0.UnixNano())
			}
			p := mustNew(t, equalBackends(size), st, Config{Algorithm: alg, SlowStart: window, Now: func() time.Time { return now }, Notified: true})
			hook := p.(Notified)
			counts := make([]int, size)
			const picks = 60_000
			for range picks {
				b := p.Pick(client(0), 1, nil)[0]
				counts[b]++
				st.active[b].Add(1)
				hook.Changed(b)
			}
			ramped := 0
			for i := range size / 2 {
				ramped += counts[i]
			}
			// Half the backends at half weight: a third of the picks.
			if share := float64(ramped) / picks; share < 0.32 || share > 0.35 {
				t.Errorf("ramping half got %.3f of picks, want 1/3", share)
			}
		})
	}
}

func TestPickAllocsAtScale(t *testing.T) {
	for _, alg := range Algorithms {
		for _, notified := range []bool{false, true} {
			st := benchState(2000)
			p := mustNew(t, equalBackends(2000), st, Config{Algorithm: alg, HashBalanceFactor: balanceFor(alg), Notified: notified})
			dst := make([]int, 0, 17)
			i := 0
			if allocs := testing.AllocsPerRun(500, func() {
				i++
				dst = p.Pick(client(i), 1+i%17, dst[:0])
				if n, ok := p.(Notified); ok {
					st.active[dst[0]].Add(1)
					n.Changed(dst[0])
				}
			}); allocs != 0 {
				t.Errorf("%s (notified=%v): %v allocations per pick", alg, notified, allocs)
			}
		}
	}
}
