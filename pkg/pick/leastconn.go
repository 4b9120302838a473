package pick

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// leastConn picks the usable backend with the fewest active connections per
// unit of effective weight, comparing (active+1)/weight so that between idle
// backends the heavier one wins. Ties are broken uniformly at random
// (reservoir sampling), so equal backends share evenly instead of the first
// one taking every tie. Fallbacks are the next best, by the same rule.
type leastConn struct {
	common
}

func (p *leastConn) Pick(_ netip.AddrPort, n int, dst []int) []int {
	now := p.clock()
	from := len(dst)
	for len(dst)-from < n {
		best := p.least(now, dst[from:])
		if best < 0 {
			break
		}
		dst = append(dst, best)
	}
	return dst
}

// least returns the usable backend not in chosen with the lowest load per
// weight, or -1.
func (p *leastConn) least(now time.Time, chosen []int) int {
	best, ties := -1, 0
	var bestLoad, bestWeight int64
	for i := range p.weights {
		if !p.usable(i) || contains(chosen, i) {
			continue
		}
		load, w := p.st.Active(i)+1, p.effectiveWeight(i, now)
		if best >= 0 {
			// load/w against bestLoad/bestWeight without division.
			switch c := cmp.Compare(load*bestWeight, bestLoad*w); {
			case c > 0:
				continue
			case c == 0:
				ties++
				if p.intn(ties) != 0 {
					continue
				}
			default:
				ties = 1
			}
		} else {
			ties = 1
		}
		best, bestLoad, bestWeight = i, load, w
	}
	return best
}

// Order lists the weighted backends by load per weight, lowest first.
func (p *leastConn) Order(_ netip.AddrPort, dst []int) []int {
	return orderByLoad(&p.common, dst)
}

// orderByLoad appends the weighted backends sorted by (active+1)/weight.
func orderByLoad(c *common, dst []int) []int {
	now := c.clock()
	from := len(dst)
	dst = c.scan(0, from, from+len(c.weights), false, dst)
	type score struct{ load, weight int64 }
	scores := make([]score, len(c.weights))
	for _, i := range dst[from:] {
		scores[i] = score{c.st.Active(i) + 1, c.effectiveWeight(i, now)}
	}
	slices.SortStableFunc(dst[from:], func(a, b int) int {
		return cmp.Compare(scores[a].load*scores[b].weight, scores[b].load*scores[a].weight)
	})
	return dst
}
