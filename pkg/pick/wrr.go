package pick

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
)

// weightedRoundRobin is nginx's smooth weighted round robin: on every pick
// each usable backend's current weight grows by its effective weight, the
// largest wins (the lowest index on ties) and gives back the total. A 5:1:1
// pool gets a a b a c a a, never five in a row.
//
// Fallbacks are the runners-up by current weight after the pick. The state
// is a slice guarded by a mutex: the algorithm is only smooth when one
// sequence serves the whole pool.
type weightedRoundRobin struct {
	common
	mu      sync.Mutex
	current []int64
}

func (p *weightedRoundRobin) Pick(_ netip.AddrPort, n int, dst []int) []int {
	if n <= 0 {
		return dst
	}
	now := p.clock()
	from := len(dst)
	p.mu.Lock()
	defer p.mu.Unlock()
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

// Order lists the weighted backends by current weight, highest first: the
// order the next picks would favour.
func (p *weightedRoundRobin) Order(_ netip.AddrPort, dst []int) []int {
	from := len(dst)
	dst = p.scan(0, from, from+len(p.weights), false, dst)
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.SortStableFunc(dst[from:], func(a, b int) int { return cmp.Compare(p.current[b], p.current[a]) })
	return dst
}
