package srclimit

import (
	"sync"
	"unsafe"
)

// sweepPerAdmit is K: how many entries each Admit examines at its shard's
// cursor, when there is a rate limit. A shard holds at most
// (K−1)/(K−3)·(L+2) entries, L the most sources alive in it at once (see
// doc.go): K = 5 makes that 2·(L+2).
const sweepPerAdmit = 5

// entry is what the Limiter knows of one source.
type entry struct {
	key   [16]byte // the address, IPv4 as IPv4-mapped IPv6
	tat   int64    // theoretical arrival time: the bucket is full when tat <= now
	conns int32    // connections admitted and not released (only with a cap)
}

// dead reports whether e carries no information at time now.
func (e *entry) dead(now int64) bool { return e.conns == 0 && e.tat <= now }

type shardState struct {
	mu     sync.Mutex
	idx    map[[16]byte]int32 // key -> position in ents
	ents   []entry
	cursor int   // the sweep's next position; [0, cursor) was visited this pass
	clock  int64 // the latest time seen by this shard
}

// shard is a shardState padded to two cache lines, so that neighbouring
// shards' locks do not share a line (nor an adjacent-line prefetch pair).
type shard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

// at returns the time of a call made at now: the shard's clock never goes
// back. s.mu is held.
func (s *shard) at(now int64) int64 {
	if now < s.clock {
		return s.clock
	}
	s.clock = now
	return now
}

// insert appends a zero entry for key and returns it. s.mu is held.
func (s *shard) insert(key [16]byte) *entry {
	s.idx[key] = int32(len(s.ents))
	s.ents = append(s.ents, entry{key: key})
	return &s.ents[len(s.ents)-1]
}

// remove drops the entry at position j, keeping the slice dense and
// [0, cursor) made only of entries the current sweep pass has visited, so
// that no entry is skipped by a pass. s.mu is held.
func (s *shard) remove(j int) {
	last := len(s.ents) - 1
	delete(s.idx, s.ents[j].key)
	if j < s.cursor {
		s.cursor--
		s.move(s.cursor, j) // a visited entry fills the hole
		j = s.cursor
	}
	s.move(last, j)
	s.ents[last] = entry{}
	s.ents = s.ents[:last]
}

func (s *shard) move(from, to int) {
	if from != to {
		s.ents[to] = s.ents[from]
		s.idx[s.ents[to].key] = int32(to)
	}
}

// sweep examines k entries at the cursor and drops the dead ones.
// s.mu is held.
func (s *shard) sweep(now int64, k int) {
	for ; k > 0 && len(s.ents) > 0; k-- {
		if s.cursor >= len(s.ents) {
			s.cursor = 0 // a new pass
		}
		if s.ents[s.cursor].dead(now) {
			s.remove(s.cursor) // an unvisited entry takes its place
		} else {
			s.cursor++
		}
	}
}
