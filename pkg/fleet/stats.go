package fleet

import (
	"sync"
	"time"
)

// Ops are the Redis operations the Store measures, in a fixed order.
var Ops = []string{"read", "trip", "close", "reopen", "acquire_probe", "release_probe", "disable", "enable", "merge", "ping", "members_read", "members_write", "unvote", "shared_read", "shared_write"}

// LatencyBuckets are the upper bounds, in seconds, of the operation
// latency histogram: from a cache hit to the timeout's neighbourhood.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// OpStats is one operation's latency histogram and error count.
type OpStats struct {
	Op     string
	Count  uint64
	Sum    float64            // seconds
	Bucket map[float64]uint64 // cumulative, by upper bound
	Errors uint64
}

// stats keeps OpStats for every op; not on any hot path (store calls are
// made by breakers' and the store's own goroutines).
type stats struct {
	mu  sync.Mutex
	ops map[string]*opStats
}

type opStats struct {
	count, errors uint64
	sum           float64
	buckets       []uint64 // non-cumulative, one per LatencyBuckets entry plus +Inf
}

func (s *stats) observe(op string, took time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops == nil {
		s.ops = map[string]*opStats{}
	}
	o := s.ops[op]
	if o == nil {
		o = &opStats{buckets: make([]uint64, len(LatencyBuckets)+1)}
		s.ops[op] = o
	}
	sec := took.Seconds()
	o.count++
	o.sum += sec
	if err != nil {
		o.errors++
	}
	i := 0
	for i < len(LatencyBuckets) && sec > LatencyBuckets[i] {
		i++
	}
	o.buckets[i]++
}

// OpStats returns every operation's figures, in the order of Ops; an op
// never made reads zero.
func (s *Store) OpStats() []OpStats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	out := make([]OpStats, 0, len(Ops))
	for _, op := range Ops {
		st := OpStats{Op: op, Bucket: make(map[float64]uint64, len(LatencyBuckets))}
		o := s.stats.ops[op]
		var cum uint64
		for i, ub := range LatencyBuckets {
			if o != nil {
				cum += o.buckets[i]
			}
			st.Bucket[ub] = cum
		}
		if o != nil {
			st.Count, st.Sum, st.Errors = o.count, o.sum, o.errors
		}
		out = append(out, st)
	}
	return out
}
