package pick

import (
	"fmt"
	"net/netip"

	"github.com/l4lb/l4lb/pkg/hashring"
)

func nodesOf(backends []Backend) []hashring.Node {
	nodes := make([]hashring.Node, len(backends))
	for i, b := range backends {
		nodes[i] = hashring.Node{ID: b.ID, Weight: b.Weight}
	}
	return nodes
}

// consistentHash owns keys by a hashring.Ring with RingVnodes points per
// unit of weight; fallbacks are the next distinct backends clockwise. With
// HashBalanceFactor > 1 a backend at or above its bounded-load capacity is
// passed over like an unusable one (and offered after all those below it,
// if n asks for more). The capacity depends on the total load and weight of
// the usable backends, which loadTotals keeps without summing the pool on
// every pick; each backend the walk considers is judged by its live load.
// The walks step only on backends in usable's mask (see usableSet).
type consistentHash struct {
	common
	ring   *hashring.Ring
	factor float64
	loads  *loadTotals // nil without a balance factor
	usable *usableSet
}

func newConsistentHash(c common, backends []Backend, cfg Config) (Picker, error) {
	ring, err := hashring.NewRing(nodesOf(backends), cfg.RingVnodes, cfg.Hash)
	if err != nil {
		return nil, fmt.Errorf("pick: consistent-hash: %w", err)
	}
	p := &consistentHash{common: c, ring: ring, factor: cfg.HashBalanceFactor}
	if p.factor != 0 {
		p.loads = newLoadTotals(&p.common, cfg.Notified)
	}
	p.usable = newUsableSet(&p.common, ring.NewMask, cfg.Notified)
	return p, nil
}

// Changed implements Notified.
func (p *consistentHash) Changed(i int) {
	p.usable.Changed(i)
	if p.loads != nil {
		p.loads.changes.Changed(i)
	}
}

func (p *consistentHash) Pick(src netip.AddrPort, n int, dst []int) []int {
	if n <= 0 {
		return dst
	}
	key := p.key.key(src)
	from := len(dst)
	tail := dst[from:]
	p.usable.absorb()
	mask := p.usable.mask
	if p.factor == 0 {
		tail = p.ring.SuccessorsIn(key, mask, tail, n, p.st.Usable)
		return append(dst[:from], tail...)
	}
	p.loads.absorb()
	total, totalWeight := p.loads.totals()
	tail = p.ring.SuccessorsIn(key, mask, tail, n, func(i int) bool {
		usable := p.st.Usable(i)
		var active int64
		if usable {
			active = p.st.Active(i)
		}
		p.loads.count(i, usable, active)
		return usable && active < hashring.Capacity(p.factor, total, int(p.weights[i]), totalWeight)
	})
	if len(tail) < n {
		tail = p.ring.SuccessorsIn(key, mask, tail, n-len(tail), p.st.Usable)
	}
	return append(dst[:from], tail...)
}

func (p *consistentHash) Order(src netip.AddrPort, dst []int) []int {
	from := len(dst)
	tail := p.ring.Successors(p.key.key(src), dst[from:], p.ring.Nodes(), nil)
	return append(dst[:from], tail...)
}

// maglev owns keys by a hashring.Maglev table of MaglevTableSize slots;
// fallbacks are the owners of the following slots (see hashring.Maglev).
// The walks step only on backends in usable's mask (see usableSet).
type maglev struct {
	common
	table  *hashring.Maglev
	usable *usableSet
}

func newMaglev(c common, backends []Backend, cfg Config) (Picker, error) {
	table, err := hashring.NewMaglev(nodesOf(backends), cfg.MaglevTableSize, cfg.Hash)
	if err != nil {
		return nil, fmt.Errorf("pick: maglev: %w: %w", ErrBadTableSize, err)
	}
	p := &maglev{common: c, table: table}
	p.usable = newUsableSet(&p.common, table.NewMask, cfg.Notified)
	return p, nil
}

// Changed implements Notified.
func (p *maglev) Changed(i int) { p.usable.Changed(i) }

func (p *maglev) Pick(src netip.AddrPort, n int, dst []int) []int {
	p.usable.absorb()
	from := len(dst)
	tail := p.table.SuccessorsIn(p.key.key(src), p.usable.mask, dst[from:], n, p.st.Usable)
	return append(dst[:from], tail...)
}

func (p *maglev) Order(src netip.AddrPort, dst []int) []int {
	from := len(dst)
	tail := p.table.Successors(p.key.key(src), dst[from:], p.table.Nodes(), nil)
	return append(dst[:from], tail...)
}
