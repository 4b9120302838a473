package pick

import (
	"net/netip"
	"sync/atomic"
)

// roundRobin hands out backends in index order, ignoring weights (except
// that weight 0 is never picked). An unusable backend's turn goes to the
// next usable one.
type roundRobin struct {
	common
	next atomic.Uint64
}

func (p *roundRobin) Pick(_ netip.AddrPort, n int, dst []int) []int {
	if n <= 0 {
		return dst
	}
	start := int((p.next.Add(1) - 1) % uint64(len(p.weights)))
	return p.scan(start, len(dst), len(dst)+n, true, dst)
}

// Order starts where the next Pick would.
func (p *roundRobin) Order(_ netip.AddrPort, dst []int) []int {
	start := int(p.next.Load() % uint64(len(p.weights)))
	return p.scan(start, len(dst), len(dst)+len(p.weights), false, dst)
}
