package breaker

import "time"

// ratioBuckets is how finely the MinRatio volume is kept. The Failures count
// itself is exact.
const ratioBuckets = 64

// window is the sliding failure window of one closed generation. It is not
// safe for concurrent use; Breaker guards it with its mutex.
//
// A trip needs the Failures-th most recent failure to lie inside the window,
// so a ring of the last Failures failure times answers that exactly in
// O(Failures) memory whatever the traffic. Successes never touch the ring:
// an intermittent backend must not hide behind them.
type window struct {
	gen    uint64
	span   time.Duration
	origin time.Time // bucket numbering starts here (local monotonic clock)

	recent []time.Time // ring of the last len(recent) failure times
	next   int
	filled int

	// Ratio volume, only kept when MinRatio > 0.
	bucketSpan time.Duration
	buckets    []ratioBucket
}

type ratioBucket struct {
	slot            int64 // which bucketSpan since origin this bucket counts
	failures, total int
}

func newWindow(cfg Config, origin time.Time) *window {
	w := &window{span: cfg.Window, origin: origin, recent: make([]time.Time, cfg.Failures)}
	if cfg.MinRatio > 0 {
		w.bucketSpan = max(cfg.Window/ratioBuckets, 1)
		w.buckets = make([]ratioBucket, ratioBuckets)
	}
	return w
}

// reset empties the window if it belongs to an older generation: a
// transition (trip, close) always starts a fresh window.
func (w *window) resetFor(gen uint64) {
	if w.gen == gen {
		return
	}
	w.gen = gen
	w.next, w.filled = 0, 0
	clear(w.buckets)
}

// add records one result of generation gen at now.
func (w *window) add(gen uint64, now time.Time, failed bool) {
	w.resetFor(gen)
	if failed {
		w.recent[w.next] = now
		w.next = (w.next + 1) % len(w.recent)
		w.filled = min(w.filled+1, len(w.recent))
	}
	if w.buckets == nil {
		return
	}
	slot := int64(now.Sub(w.origin) / w.bucketSpan)
	b := &w.buckets[slot%ratioBuckets]
	if b.slot != slot {
		*b = ratioBucket{slot: slot}
	}
	b.total++
	if failed {
		b.failures++
	}
}

// failuresReached reports whether the window holds at least Failures
// failures at now.
func (w *window) failuresReached(now time.Time) bool {
	if w.filled < len(w.recent) {
		return false
	}
	oldest := w.recent[w.next] // the ring is full: next is the oldest slot
	return now.Sub(oldest) < w.span
}

// ratio returns failures and total dials in the last ratioBuckets buckets.
func (w *window) ratio(now time.Time) (failures, total int) {
	slot := int64(now.Sub(w.origin) / w.bucketSpan)
	for _, b := range w.buckets {
		if b.slot > slot-ratioBuckets && b.slot <= slot && b.total > 0 {
			failures += b.failures
			total += b.total
		}
	}
	return failures, total
}

// shouldTrip applies rule 1 to the window at now.
func (w *window) shouldTrip(cfg Config, now time.Time) bool {
	if !w.failuresReached(now) {
		return false
	}
	if cfg.MinRatio <= 0 {
		return true
	}
	f, t := w.ratio(now)
	return t >= cfg.MinVolume && t > 0 && float64(f) >= cfg.MinRatio*float64(t)
}

// clone returns a copy of w that shares nothing with it.
func (w *window) clone() *window {
	c := *w
	c.recent = append([]time.Time(nil), w.recent...)
	c.buckets = append([]ratioBucket(nil), w.buckets...)
	return &c
}

// failureTimes returns the failures the ring holds, oldest first.
func (w *window) failureTimes() []time.Time {
	out := make([]time.Time, 0, w.filled)
	first := (w.next - w.filled + len(w.recent)) % len(w.recent)
	for i := range w.filled {
		out = append(out, w.recent[(first+i)%len(w.recent)])
	}
	return out
}

// carry makes prev's failures (the latest len(w.recent) of them) and
// generation w's own; and its ratio volume too, when both count volume
// in buckets of the same span.
func (w *window) carry(prev *window) {
	w.gen = prev.gen
	w.next, w.filled = 0, 0
	for _, t := range prev.failureTimes() {
		w.recent[w.next] = t
		w.next = (w.next + 1) % len(w.recent)
		w.filled = min(w.filled+1, len(w.recent))
	}
	clear(w.buckets)
	if w.buckets != nil && prev.buckets != nil && w.bucketSpan == prev.bucketSpan {
		w.origin = prev.origin
		copy(w.buckets, prev.buckets)
	}
}
