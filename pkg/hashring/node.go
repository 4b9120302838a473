package hashring

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// HashFunc hashes bytes to 64 bits. It must be deterministic and should be
// uniform; nil means xxhash.Sum64.
type HashFunc func([]byte) uint64

// Node is one member of a ring or Maglev table.
type Node struct {
	// ID is the node's identity: its placement derives only from the hash of
	// this string.
	ID string
	// Weight scales the node's share of keys. A node of weight 0 is kept (its
	// index stays valid) but owns no keys.
	Weight int
}

// Errors returned by the constructors.
var (
	ErrNoNodes        = errors.New("hashring: no nodes")
	ErrEmptyID        = errors.New("hashring: empty node id")
	ErrDuplicateID    = errors.New("hashring: duplicate node id")
	ErrNegativeWeight = errors.New("hashring: negative weight")
	ErrTableSize      = errors.New("hashring: bad maglev table size")
	ErrRingTooLarge   = errors.New("hashring: ring too large")
	ErrVnodes         = errors.New("hashring: no points per unit of weight")
)

func orDefault(h HashFunc) HashFunc {
	if h == nil {
		return xxhash.Sum64
	}
	return h
}

// checkNodes validates nodes and returns how many have weight > 0.
func checkNodes(nodes []Node) (weighted int, err error) {
	if len(nodes) == 0 {
		return 0, ErrNoNodes
	}
	seen := make(map[string]struct{}, len(nodes))
	for i, n := range nodes {
		if n.ID == "" {
			return 0, fmt.Errorf("node %d: %w", i, ErrEmptyID)
		}
		if _, dup := seen[n.ID]; dup {
			return 0, fmt.Errorf("node %d %q: %w", i, n.ID, ErrDuplicateID)
		}
		seen[n.ID] = struct{}{}
		if n.Weight < 0 {
			return 0, fmt.Errorf("node %d %q weight %d: %w", i, n.ID, n.Weight, ErrNegativeWeight)
		}
		if n.Weight > 0 {
			weighted++
		}
	}
	return weighted, nil
}

// byID returns the indices of nodes sorted by ID: every build iterates in
// this order so that the input order never matters.
func byID(nodes []Node) []int {
	idx := make([]int, len(nodes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(nodes[a].ID, nodes[b].ID) })
	return idx
}
