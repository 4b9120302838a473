package hashring

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/l4lb/l4lb/pkg/config"
)

// testVnodes and testTableSize are the sizes l4lb builds its structures
// with by default (pkg/config's ring_vnodes and maglev_table_size).
var (
	testVnodes    = config.DefaultPool("").RingVnodes
	testTableSize = config.DefaultPool("").MaglevTableSize
)

// decimalHash reads its input as a decimal number, so that ring point v of
// node "6" sits at "v6" (groupcache's consistenthash test trick).
func decimalHash(b []byte) uint64 {
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// tableHash returns hand-picked values for named inputs.
func tableHash(values map[string]uint64) HashFunc {
	return func(b []byte) uint64 {
		v, ok := values[string(b)]
		if !ok {
			panic("tableHash: no value for " + string(b))
		}
		return v
	}
}

func equalNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{ID: fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1), Weight: 1}
	}
	return nodes
}

// keyOf is the i-th test key: xxhash of i, as a hashed client address would be.
func keyOf(i int) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	return xxhash.Sum64(b[:])
}

func shuffled(nodes []Node, seed uint64) []Node {
	out := append([]Node(nil), nodes...)
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// maxOverMean returns max(counts)/mean(counts).
func maxOverMean(counts []int) float64 {
	total, peak := 0, 0
	for _, c := range counts {
		total += c
		peak = max(peak, c)
	}
	return float64(peak) / (float64(total) / float64(len(counts)))
}

type lookuper interface{ Lookup(key uint64) int }

func counts(l lookuper, nodes, keys int) []int {
	c := make([]int, nodes)
	for i := range keys {
		c[l.Lookup(keyOf(i))]++
	}
	return c
}
