package breaker

import (
	"testing"
	"time"
	"unsafe"
)

// footprint is the memory a window holds: the struct and its two slices.
func (w *window) footprint() uintptr {
	return unsafe.Sizeof(*w) +
		uintptr(cap(w.recent))*unsafe.Sizeof(w.recent[0]) +
		uintptr(cap(w.buckets))*unsafe.Sizeof(w.buckets[0])
}

// A backend's window, and the copy a reload makes of it (Inherit), hold
// the same bounded memory whatever `failures` says: 1,000,000 (the most
// the configuration allows) once cost 24 MB per backend and per reload.
func TestWindowMemoryIsBoundedWhateverFailures(t *testing.T) {
	const bound = 4 << 10
	for _, failures := range []int{1, 3, exactFailures, exactFailures + 1, 1000, 1_000_000} {
		for _, ratio := range []float64{0, 0.5} {
			cfg := Config{Failures: failures, MinRatio: ratio}.withDefaults()
			w := newWindow(cfg, time.Now())
			for range 10 {
				w.add(0, time.Now(), true)
			}
			next := newWindow(cfg, time.Now())
			next.carry(w.clone())
			for name, x := range map[string]*window{"window": w, "clone": w.clone(), "carried": next} {
				if got := x.footprint(); got > bound {
					t.Errorf("failures=%d min_ratio=%v: %s holds %d bytes, want at most %d", failures, ratio, name, got, bound)
				}
			}
		}
	}
}

// Above exactFailures the failures are counted per bucket of Window/64:
// a failure counts while its bucket lies inside the window, so for at
// least Window − Window/64 and never for Window or longer.
func TestBucketedFailuresAgeWithinOneBucket(t *testing.T) {
	const span = 64 * time.Second // buckets of 1 s
	cfg := Config{Failures: exactFailures + 1, Window: span}.withDefaults()
	origin := time.Now()
	at := func(d time.Duration) time.Time { return origin.Add(d) }
	for _, failedAt := range []time.Duration{0, 300 * time.Millisecond, 999 * time.Millisecond, 17500 * time.Millisecond} {
		w := newWindow(cfg, origin)
		if w.recent != nil {
			t.Fatalf("failures=%d kept a ring of times", cfg.Failures)
		}
		for range cfg.Failures - 1 {
			w.add(0, at(failedAt), true)
		}
		if w.shouldTrip(cfg, at(failedAt)) {
			t.Fatalf("tripped at %d failures, want %d", cfg.Failures-1, cfg.Failures)
		}
		w.add(0, at(failedAt), true)
		for age := time.Duration(0); age <= span+2*time.Second; age += 100 * time.Millisecond {
			counted := w.shouldTrip(cfg, at(failedAt+age))
			switch {
			case age >= span && counted:
				t.Fatalf("failures at %v still count %v later (window %v)", failedAt, age, span)
			case age < span-span/ratioBuckets && !counted:
				t.Fatalf("failures at %v no longer count %v later, within the window less one bucket", failedAt, age)
			}
		}
	}
}

// A reload may move failures between the two kinds of window (the
// `failures` setting crossed exactFailures): they carry either way.
func TestCarryBetweenExactAndBucketedWindows(t *testing.T) {
	origin := time.Now()
	small := Config{Failures: 3, Window: time.Minute}.withDefaults()
	large := Config{Failures: exactFailures + 1, Window: time.Minute}.withDefaults()

	exact := newWindow(small, origin)
	exact.add(0, origin.Add(time.Second), true)
	exact.add(0, origin.Add(2*time.Second), true)
	bucketed := newWindow(large, origin.Add(3*time.Second))
	bucketed.carry(exact)
	if f, _ := bucketed.ratio(origin.Add(3 * time.Second)); f != 2 {
		t.Fatalf("a bucketed window took %d of the 2 exact failures", f)
	}

	for range exactFailures {
		bucketed.add(0, origin.Add(4*time.Second), true)
	}
	if !bucketed.shouldTrip(large, origin.Add(4*time.Second)) {
		t.Fatal("2 carried and 64 new failures did not reach failures = 65")
	}
	back := newWindow(small, origin.Add(5*time.Second))
	back.carry(bucketed)
	if back.filled != 3 {
		t.Fatalf("an exact window of 3 took %d failures from a bucketed one", back.filled)
	}
	if !back.shouldTrip(small, origin.Add(5*time.Second)) {
		t.Fatal("three carried failures inside the window did not trip failures = 3")
	}
	// Carried at the start of their bucket, they age out no later than
	// the real ones would.
	if back.shouldTrip(small, origin.Add(4*time.Second+time.Minute)) {
		t.Fatal("carried failures counted a whole window after they happened")
	}
}
