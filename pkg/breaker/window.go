package breaker

import (
	"slices"
	"time"
)

// ratioBuckets is how finely the window keeps counts: the MinRatio volume
// always, and the failures themselves when Failures > exactFailures.
const ratioBuckets = 64

// exactFailures is the largest Failures whose failure times the window
// keeps one by one (exact trips). A larger setting (up to the 1,000,000 the
// configuration allows) counts failures in the ratioBuckets buckets
// instead, so a window's memory is bounded whatever the setting: at most
// exactFailures offsets and ratioBuckets buckets (about 1.5 KiB), where
// one time per failure was 24 MB at 1,000,000, and again at every reload.
const exactFailures = 64

// window is the sliding failure window of one closed generation. It is not
// safe for concurrent use; Breaker guards it with its mutex.
//
// A trip needs the Failures-th most recent failure to lie inside the
// window. Up to exactFailures, a ring of the last Failures failure times
// answers that exactly. Above it the failures are counted per bucket of
// Window/64, and a bucket counts while it lies inside the window: a
// failure then counts for at least Window − Window/64 and never longer
// than Window (the edge the MinRatio volume has always had). Successes
// never touch the failure count: an intermittent backend must not hide
// behind them.
type window struct {
	gen    uint64
	span   time.Duration
	need   int       // Config.Failures
	origin time.Time // offsets and bucket numbers start here (local monotonic clock)

	// recent is the ring of the last len(recent) failure times as offsets
	// from origin; nil when Failures > exactFailures.
	recent []time.Duration
	next   int
	filled int

	// Counts per bucket: kept when MinRatio > 0 (the volume) or when the
	// failures are counted in buckets (recent == nil).
	bucketSpan time.Duration
	buckets    []ratioBucket
}

type ratioBucket struct {
	slot            int64 // which bucketSpan since origin this bucket counts
	failures, total int
}

func newWindow(cfg Config, origin time.Time) *window {
	w := &window{span: cfg.Window, need: cfg.Failures, origin: origin}
	if cfg.Failures <= exactFailures {
		w.recent = make([]time.Duration, cfg.Failures)
	}
	if cfg.MinRatio > 0 || w.recent == nil {
		w.bucketSpan = max(cfg.Window/ratioBuckets, 1)
		w.buckets = make([]ratioBucket, ratioBuckets)
	}
	return w
}

// resetFor empties the window if it belongs to an older generation: a
// transition (trip, close) always starts a fresh window.
func (w *window) resetFor(gen uint64) {
	if w.gen == gen {
		return
	}
	w.gen = gen
	w.restart()
}

// restart empties the window: a local transition (quorum.go) starts a
// fresh one, as a transition of the Store's generation does.
func (w *window) restart() {
	w.next, w.filled = 0, 0
	clear(w.buckets)
}

// add records one result of generation gen at now.
func (w *window) add(gen uint64, now time.Time, failed bool) {
	w.resetFor(gen)
	if failed && w.recent != nil {
		w.push(now.Sub(w.origin))
	}
	if w.buckets == nil {
		return
	}
	f := 0
	if failed {
		f = 1
	}
	w.addCounts(now, f, 1)
}

// push adds one failure at offset off to the ring.
func (w *window) push(off time.Duration) {
	w.recent[w.next] = off
	w.next = (w.next + 1) % len(w.recent)
	w.filled = min(w.filled+1, len(w.recent))
}

func (w *window) slot(t time.Time) int64 { return int64(t.Sub(w.origin) / w.bucketSpan) }

// addCounts adds failures and total dials to the bucket of t. Counts of a
// slot older than the one its bucket holds now are out of the window
// anyway, and are not added.
func (w *window) addCounts(t time.Time, failures, total int) {
	slot := w.slot(t)
	b := &w.buckets[((slot%ratioBuckets)+ratioBuckets)%ratioBuckets]
	if b.total > 0 && b.slot > slot {
		return
	}
	if b.slot != slot {
		*b = ratioBucket{slot: slot}
	}
	b.total += total
	b.failures += failures
}

// failuresReached reports whether the window holds at least Failures
// failures at now.
func (w *window) failuresReached(now time.Time) bool {
	if w.recent == nil {
		f, _ := w.ratio(now)
		return f >= w.need
	}
	if w.filled < len(w.recent) {
		return false
	}
	oldest := w.recent[w.next] // the ring is full: next is the oldest slot
	return now.Sub(w.origin)-oldest < w.span
}

// ratio returns failures and total dials in the last ratioBuckets buckets.
func (w *window) ratio(now time.Time) (failures, total int) {
	slot := w.slot(now)
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
	c.recent = slices.Clone(w.recent)
	c.buckets = slices.Clone(w.buckets)
	return &c
}

// failureTimes returns the failures the ring holds, oldest first (none
// when failures are counted in buckets).
func (w *window) failureTimes() []time.Time {
	out := make([]time.Time, 0, w.filled)
	for i := range w.filled {
		out = append(out, w.origin.Add(w.recent[(w.next-w.filled+i+len(w.recent))%len(w.recent)]))
	}
	return out
}

// usedBuckets returns w's buckets that count anything, oldest first.
func (w *window) usedBuckets() []ratioBucket {
	var out []ratioBucket
	for _, b := range w.buckets {
		if b.total > 0 {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b ratioBucket) int { return int(a.slot - b.slot) })
	return out
}

// carry makes prev's failures and generation w's own: the latest
// len(w.recent) failure times, or the failures per bucket, and the ratio
// volume. What prev counted per bucket is placed at the start of its
// bucket, the oldest it can be, so a carried failure never counts past its
// window. A bucketed prev gives a ring at most len(w.recent) times per
// bucket: more would only be overwritten.
func (w *window) carry(prev *window) {
	w.gen = prev.gen
	w.next, w.filled = 0, 0
	clear(w.buckets)
	sameBuckets := w.buckets != nil && prev.buckets != nil && w.bucketSpan == prev.bucketSpan
	if sameBuckets {
		w.origin = prev.origin // so prev's bucket numbers are w's
	}
	prevBuckets := prev.usedBuckets()
	start := func(b ratioBucket) time.Time { return prev.origin.Add(time.Duration(b.slot) * prev.bucketSpan) }
	if w.recent != nil {
		if prev.recent != nil {
			for _, t := range prev.failureTimes() {
				w.push(t.Sub(w.origin))
			}
		} else {
			for _, b := range prevBuckets {
				for range min(b.failures, len(w.recent)) {
					w.push(start(b).Sub(w.origin))
				}
			}
		}
	}
	switch {
	case w.buckets == nil:
	case sameBuckets:
		copy(w.buckets, prev.buckets)
	case prev.buckets != nil:
		for _, b := range prevBuckets {
			w.addCounts(start(b), b.failures, b.total)
		}
	default: // prev kept failure times only: each is a dial and a failure
		for _, t := range prev.failureTimes() {
			w.addCounts(t, 1, 1)
		}
	}
}
