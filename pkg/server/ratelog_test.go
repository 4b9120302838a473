package server

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestRefusalLogWritesAtMostOneLinePerPeriodWithACount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lines []int64
		r := newRefusalLog(time.Second, func(_ string, n int64) {
			mu.Lock()
			lines = append(lines, n)
			mu.Unlock()
		})
		got := func() []int64 {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(lines)
		}
		r.note("p") // first after quiet: at once
		if l := got(); !slices.Equal(l, []int64{1}) {
			t.Fatalf("lines %v, want [1] at once", l)
		}
		time.Sleep(50 * time.Millisecond)
		for range 10 { // at 50, 150, ... 950 ms: within the first period
			r.note("p")
			time.Sleep(100 * time.Millisecond)
		}
		for range 5 { // at 1050 ... 1450 ms: the second period
			r.note("p")
			time.Sleep(100 * time.Millisecond)
		}
		// 1550 ms now.
		if l := got(); !slices.Equal(l, []int64{1, 10}) {
			t.Fatalf("lines %v, want [1 10]: the first period's refusals at its end, nothing yet for the second", l)
		}
		time.Sleep(time.Second)
		if l := got(); !slices.Equal(l, []int64{1, 10, 5}) {
			t.Fatalf("lines %v, want the second period's count at its end", l)
		}
		time.Sleep(5 * time.Second) // quiet: no empty lines
		r.note("p")
		if l := got(); !slices.Equal(l, []int64{1, 10, 5, 1}) {
			t.Fatalf("lines %v, want a refusal after quiet written at once", l)
		}
		r.note("p")
		r.note("p")
		r.stop()
		if l := got(); !slices.Equal(l, []int64{1, 10, 5, 1, 2}) {
			t.Fatalf("lines %v, want stop to write what was pending", l)
		}
		r.note("p")
		time.Sleep(2 * time.Second)
		if l := got(); len(l) != 5 {
			t.Fatalf("lines %v: a stopped log wrote again", l)
		}
	})
}

// Within a period each pool's refusals make a line of their own (a
// routing listener refuses clients of several pools), in pool order.
func TestRefusalLogCountsEachPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lines []string
		r := newRefusalLog(time.Second, func(pool string, n int64) {
			mu.Lock()
			lines = append(lines, fmt.Sprintf("%s=%d", pool, n))
			mu.Unlock()
		})
		got := func() []string {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(lines)
		}
		r.note("web") // first after quiet: at once, its pool named
		for _, p := range []string{"web", "api", "web", "api", "api"} {
			r.note(p)
		}
		time.Sleep(1500 * time.Millisecond)
		if l := got(); !slices.Equal(l, []string{"web=1", "api=3", "web=2"}) {
			t.Fatalf("lines %v, want [web=1 api=3 web=2]: one line per pool at the period's end", l)
		}
		r.note("fallback")
		r.stop()
		if l := got(); !slices.Equal(l, []string{"web=1", "api=3", "web=2", "fallback=1"}) {
			t.Fatalf("lines %v, want stop to write the pending pool", l)
		}
	})
}
