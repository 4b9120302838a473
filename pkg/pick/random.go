package pick

import "net/netip"

// randomTries bounds rejection sampling before falling back to a scan from
// a random start (only reached when most backends are unusable).
const randomTries = 8

// random picks a uniformly random usable backend, ignoring weights (except
// that weight 0 is never picked); fallbacks follow it in index order.
type random struct {
	common
}

func (p *random) Pick(_ netip.AddrPort, n int, dst []int) []int {
	if n <= 0 {
		return dst
	}
	from := len(dst)
	start := p.intn(len(p.weights))
	if first := p.randomUsable(randomTries, nil); first >= 0 {
		dst = append(dst, first)
		start = first + 1
		if start == len(p.weights) {
			start = 0
		}
	}
	return p.scan(start, from, from+n, true, dst)
}

// Order is a random rotation of the index order.
func (p *random) Order(_ netip.AddrPort, dst []int) []int {
	return p.scan(p.intn(len(p.weights)), len(dst), len(dst)+len(p.weights), false, dst)
}
