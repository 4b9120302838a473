package pick

import (
	"net/netip"
)

// p2c is the power of two random choices: draw two distinct usable backends
// uniformly and take the one with fewer active connections per unit of
// effective weight ((active+1)/weight, ties to the first draw, which is as
// random as the second). The loser is the first fallback; further fallbacks
// follow in index order from a random start.
//
// Weights act through the comparison: a backend of twice the weight wins
// until it carries twice the connections, so shares settle in proportion to
// weight.
type p2c struct {
	common
}

func (p *p2c) Pick(_ netip.AddrPort, n int, dst []int) []int {
	if n <= 0 {
		return dst
	}
	from := len(dst)
	a := p.draw(dst[from:])
	if a < 0 {
		return dst
	}
	dst = append(dst, a)
	b := p.draw(dst[from:])
	if b < 0 {
		return dst
	}
	now := p.clock()
	la, wa := p.st.Active(a)+1, p.effectiveWeight(a, now)
	lb, wb := p.st.Active(b)+1, p.effectiveWeight(b, now)
	if lb*wa < la*wb {
		dst[from] = b
		a, b = b, a
	}
	if n == 1 {
		return dst
	}
	dst = append(dst, b)
	return p.scan(p.intn(len(p.weights)), from, from+n, true, dst)
}

// draw returns a uniformly random usable backend not in chosen, or -1 when
// there is none.
func (p *p2c) draw(chosen []int) int {
	if i := p.randomUsable(randomTries, chosen); i >= 0 {
		return i
	}
	n := len(p.weights)
	start := p.intn(n)
	for k := range n {
		if i := (start + k) % n; p.usable(i) && !contains(chosen, i) {
			return i
		}
	}
	return -1
}

// Order lists the weighted backends by load per weight, lowest first.
func (p *p2c) Order(_ netip.AddrPort, dst []int) []int {
	return orderByLoad(&p.common, dst)
}
