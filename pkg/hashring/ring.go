package hashring

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// MaxRingPoints bounds vnodes × total weight, to keep a misconfigured ring
// (1000 nodes of weight 256) from eating gigabytes.
const MaxRingPoints = 1 << 22

// Ring is a consistent-hash ring with virtual nodes. Node i owns
// vnodes × Weight points; point v of a node with ID id sits at
// hash(decimal(v) + id), as in groupcache's consistenthash, so its position
// depends only on its ID. A key belongs to the first point at or after it,
// wrapping around.
//
// A Ring is immutable and safe for concurrent use.
type Ring struct {
	hashes   []uint64 // sorted point positions
	owners   []int32  // node index of each point
	weights  []int32  // per node, as given
	weighted int      // nodes with weight > 0
	// index[j] is the first point at or after j << shift: it narrows the
	// binary search to a bucket of ~2 points, saving the cache misses of a
	// search over the whole ring (~1 MiB at 1000 nodes).
	index []int32
	shift uint
	bits  bitsets // for walks that meet many of many nodes
}

// NewRing builds a ring over nodes with vnodes points per unit of weight
// (at least 1) hashed by hash (nil means xxhash). With v points a node's
// share of the ring deviates from its ideal by about 1/sqrt(v) as a
// standard deviation.
// Points that collide are ordered by node ID, so the result never depends on
// the order of nodes.
func NewRing(nodes []Node, vnodes int, hash HashFunc) (*Ring, error) {
	weighted, err := checkNodes(nodes)
	if err != nil {
		return nil, err
	}
	if vnodes <= 0 {
		return nil, fmt.Errorf("%d points per unit of weight: %w", vnodes, ErrVnodes)
	}
	hash = orDefault(hash)
	total := 0
	for _, n := range nodes {
		total += n.Weight * vnodes
		if total > MaxRingPoints {
			return nil, fmt.Errorf("more than %d points (lower the weights or vnodes): %w", MaxRingPoints, ErrRingTooLarge)
		}
	}
	type point struct {
		hash  uint64
		rank  int32 // the node's position in ID order, to break collisions
		vnode int32
		owner int32
	}
	rank := make([]int32, len(nodes))
	for r, i := range byID(nodes) {
		rank[i] = int32(r)
	}
	points := make([]point, 0, total)
	var buf []byte
	for i, n := range nodes {
		for v := range n.Weight * vnodes {
			buf = append(strconv.AppendInt(buf[:0], int64(v), 10), n.ID...)
			points = append(points, point{hash: hash(buf), rank: rank[i], vnode: int32(v), owner: int32(i)})
		}
	}
	slices.SortFunc(points, func(a, b point) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.vnode, b.vnode)
	})
	r := &Ring{
		hashes:   make([]uint64, len(points)),
		owners:   make([]int32, len(points)),
		weights:  make([]int32, len(nodes)),
		weighted: weighted,
	}
	for i, p := range points {
		r.hashes[i], r.owners[i] = p.hash, p.owner
	}
	for i, n := range nodes {
		r.weights[i] = int32(n.Weight)
	}
	r.buildIndex()
	return r, nil
}

// buildIndex makes one bucket per point (rounded to a power of two).
func (r *Ring) buildIndex() {
	bits := uint(1)
	for 1<<bits < len(r.hashes) && bits < 30 {
		bits++
	}
	r.shift = 64 - bits
	r.index = make([]int32, 1<<bits+1)
	p := 0
	for j := range 1 << bits {
		for p < len(r.hashes) && r.hashes[p]>>r.shift < uint64(j) {
			p++
		}
		r.index[j] = int32(p)
	}
	r.index[1<<bits] = int32(len(r.hashes))
}

// Nodes returns the number of nodes the ring was built from (including
// those of weight 0).
func (r *Ring) Nodes() int { return len(r.weights) }

// Len returns the number of points on the ring.
func (r *Ring) Len() int { return len(r.hashes) }

// Point returns the position and owner of point p, 0 <= p < Len(), in
// ascending order of position.
func (r *Ring) Point(p int) (hash uint64, node int) { return r.hashes[p], int(r.owners[p]) }

// search returns the index of the first point at or after key, wrapping to
// 0 past the last point.
func (r *Ring) search(key uint64) int {
	j := key >> r.shift
	lo, hi := int(r.index[j]), int(r.index[j+1])
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.hashes[mid] < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(r.hashes) {
		return 0
	}
	return lo
}

// Lookup returns the node that owns key, or -1 when the ring has no points
// (every weight is 0).
func (r *Ring) Lookup(key uint64) int {
	if len(r.hashes) == 0 {
		return -1
	}
	return int(r.owners[r.search(key)])
}

// Successors appends to dst up to n distinct nodes in ring order starting at
// key's owner, skipping nodes that accept rejects (nil accepts every node)
// and nodes already in dst. The first node appended is the owner of key
// among the accepted nodes, the rest are its fallbacks.
//
// It calls accept at most once per node, and stops once it has met every
// node, so when accept rejects nearly all of them it costs O(nodes): use
// SuccessorsIn with a mask of the nodes accept could take to bound it.
//
// It allocates nothing beyond growing dst: walks over rings of more than
// 1024 nodes that meet more than 16 recycle a bitmap, which is allocated
// only until the ring has one for each concurrent walk. accept must not
// retain anything: it is called on the caller's goroutine before
// Successors returns.
func (r *Ring) Successors(key uint64, dst []int, n int, accept func(node int) bool) []int {
	return r.SuccessorsIn(key, nil, dst, n, accept)
}

// SuccessorsIn is Successors over the nodes in mask only (nil: all), made
// by NewMask: the same nodes as Successors with an accept that also
// rejects the nodes out of mask, at a cost that grows with the nodes it
// meets in mask, not with the ring.
func (r *Ring) SuccessorsIn(key uint64, mask *Mask, dst []int, n int, accept func(node int) bool) []int {
	if len(r.hashes) == 0 {
		return dst
	}
	mask.check(r.owners)
	return walk(r.owners, r.search(key), r.weights, r.weighted, dst, n, accept, &r.bits, mask)
}

// NewMask returns a mask over the ring's points with every node in.
func (r *Ring) NewMask() *Mask { return NewMask(r.owners, len(r.weights)) }
