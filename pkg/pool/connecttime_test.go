package pool

import (
	"sync"
	"testing"
	"time"
)

// Each connect time lands in the first bucket whose bound it does not
// pass (bounds are inclusive, as Prometheus' le); the histogram is
// cumulative, its count takes times past every bound too, and its sum is
// exact.
func TestConnectTimesBuckets(t *testing.T) {
	b := &Backend{counters: &counters{}}
	times := []time.Duration{
		0, 50 * time.Microsecond, 100 * time.Microsecond, // <= 0.0001
		101 * time.Microsecond, // <= 0.00025
		time.Millisecond,       // <= 0.001
		30 * time.Millisecond,  // <= 0.05
		time.Second,            // <= 1
		4 * time.Second,        // <= 5
		6 * time.Second,        // above every bound
		-time.Millisecond,      // a clock oddity counts as 0
	}
	var sum time.Duration
	for _, d := range times {
		b.ObserveConnect(d)
		sum += max(d, 0)
	}
	h := b.ConnectTimes()
	if h.Count != uint64(len(times)) || h.Sum != sum {
		t.Fatalf("count %d sum %v, want %d and %v", h.Count, h.Sum, len(times), sum)
	}
	want := map[float64]uint64{0.0001: 4, 0.00025: 5, 0.0005: 5, 0.001: 6, 0.025: 6, 0.05: 7, 0.5: 7, 1: 8, 2.5: 8, 5: 9}
	for i, le := range ConnectBuckets {
		if w, ok := want[le]; ok && h.Cumulative[i] != w {
			t.Errorf("le=%v: %d, want %d", le, h.Cumulative[i], w)
		}
		if i > 0 && h.Cumulative[i] < h.Cumulative[i-1] {
			t.Errorf("le=%v: %d below the bucket before", le, h.Cumulative[i])
		}
	}
}

// Loops add to one backend's histogram at once without a lock and lose
// nothing.
func TestConnectTimesConcurrent(t *testing.T) {
	b := &Backend{counters: &counters{}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 1000 {
				b.ObserveConnect(time.Duration(i) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if h := b.ConnectTimes(); h.Count != 4000 || h.Sum != 4*999*1000/2*time.Microsecond {
		t.Fatalf("count %d sum %v after 4000 observations", h.Count, h.Sum)
	}
}
