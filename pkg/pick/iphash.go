package pick

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/l4lb/l4lb/pkg/hashring"
)

// ipHashRehashes is how many rehashes look for a fallback before the
// sequence continues in ID order (nginx's ip_hash tries 20 times too).
const ipHashRehashes = 20

// ipHash maps the key modulo the total weight onto the weighted backends
// laid end to end in ID order (sorting by ID makes the mapping independent
// of the configured order). Fallbacks are a deterministic rehash sequence:
// key_k = mix(key, k) for k = 1..20, then the remaining backends in ID
// order after the owner. Adding or removing a backend remaps most keys, as
// modulo hashing does; use consistent-hash or maglev to avoid that. The
// ID-order part steps only on backends in usable's mask, laid over sorted
// (see usableSet).
type ipHash struct {
	common
	usable *usableSet
	sorted []int    // weighted backends in ID order
	ends   []uint64 // ends[j]: cumulative weight of sorted[:j+1]
	pos    []int    // pos[i]: i's position in sorted
	total  uint64
	// index[b] is the position owning the first key of bucket b, where
	// bucket b holds the keys x (mod total) with x·buckets/total = b, and
	// index[buckets] is the last position: slot searches only between
	// index[b] and index[b+1], usually one or two positions.
	index []int32
}

func newIPHash(c common, backends []Backend, notified bool) *ipHash {
	p := &ipHash{common: c, pos: make([]int, len(backends))}
	for i, b := range backends {
		if b.Weight > 0 {
			p.sorted = append(p.sorted, i)
		}
	}
	slices.SortFunc(p.sorted, func(a, b int) int { return strings.Compare(backends[a].ID, backends[b].ID) })
	for j, i := range p.sorted {
		p.total += uint64(backends[i].Weight)
		p.ends = append(p.ends, p.total)
		p.pos[i] = j
	}
	p.buildIndex()
	p.usable = newUsableSet(&p.common, func() *hashring.Mask {
		seq := make([]int32, len(p.sorted))
		for j, i := range p.sorted {
			seq[j] = int32(i)
		}
		return hashring.NewMask(seq, len(backends))
	}, notified)
	return p
}

// Changed implements Notified.
func (p *ipHash) Changed(i int) { p.usable.Changed(i) }

// buildIndex makes about one bucket per weighted backend.
func (p *ipHash) buildIndex() {
	if p.total == 0 {
		return
	}
	buckets := uint64(len(p.sorted))
	p.index = make([]int32, buckets+1)
	j := 0
	for b := range buckets {
		// The first key of bucket b: the least x with x·buckets/total >= b.
		x := (b*p.total + buckets - 1) / buckets
		for p.ends[j] <= x {
			j++
		}
		p.index[b] = int32(j)
	}
	p.index[buckets] = int32(len(p.sorted) - 1)
}

// slot returns the sorted position owning key.
func (p *ipHash) slot(key uint64) int {
	x := key % p.total
	// total <= MaxWeight × backends and there is one bucket per backend,
	// so the product cannot overflow for any pool that fits in memory.
	b := x * uint64(len(p.sorted)) / p.total
	lo, hi := int(p.index[b]), int(p.index[b+1])
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if p.ends[mid] <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// mix is the splitmix64 finalizer of key + k·φ: a cheap, well-spread,
// fixed rehash that does not depend on the injected hash.
func mix(key uint64, k int) uint64 {
	z := key + uint64(k)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (p *ipHash) Pick(src netip.AddrPort, n int, dst []int) []int {
	p.usable.absorb()
	return p.sequence(p.key.key(src), n, true, dst)
}

func (p *ipHash) Order(src netip.AddrPort, dst []int) []int {
	return p.sequence(p.key.key(src), len(p.sorted), false, dst)
}

// sequence appends up to n distinct backends of key's preference sequence,
// only usable ones if usableOnly.
func (p *ipHash) sequence(key uint64, n int, usableOnly bool, dst []int) []int {
	if n <= 0 || p.total == 0 {
		return dst
	}
	from := len(dst)
	want := from + n
	take := func(i int) {
		if len(dst) < want && (!usableOnly || p.st.Usable(i)) && !contains(dst[from:], i) {
			dst = append(dst, i)
		}
	}
	owner := p.slot(key)
	take(p.sorted[owner])
	for k := 1; k <= ipHashRehashes && len(dst) < want; k++ {
		take(p.sorted[p.slot(mix(key, k))])
	}
	if mask := p.usable.mask; usableOnly && mask != nil {
		// The same backends as the loop below, reached by jumps over the
		// positions of those out of the mask.
		for j := 1; j < len(p.sorted) && len(dst) < want; j++ {
			at := (owner + j) % len(p.sorted)
			q := mask.Next(at)
			if q < 0 {
				break
			}
			if j += q - at; q < at {
				j += len(p.sorted)
			}
			if j < len(p.sorted) {
				take(p.sorted[q])
			}
		}
		return dst
	}
	for j := 1; j < len(p.sorted) && len(dst) < want; j++ {
		take(p.sorted[(owner+j)%len(p.sorted)])
	}
	return dst
}
