package memtrim

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The trimmer returns a large free heap to the OS, leaves a small one (or
// one small beside the heap in use) alone, and does it at most once per
// trimMinInterval under churn.
func TestFreeHeapIsReturnedWithinAPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		free, inUse := uint64(512<<10), uint64(2<<20)
		var frees atomic.Int32
		m := New(slog.New(slog.DiscardHandler))
		m.read = func() (uint64, uint64) { mu.Lock(); defer mu.Unlock(); return free, inUse }
		m.free = func() { frees.Add(1); mu.Lock(); free = 0; mu.Unlock() }
		set := func(f, u uint64) { mu.Lock(); free, inUse = f, u; mu.Unlock() }
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		wait := func(d time.Duration) { time.Sleep(d); synctest.Wait() }

		wait(2 * trimPeriod)
		if n := frees.Load(); n != 0 {
			t.Fatalf("freed %d times with 512 KiB free", n)
		}
		set(8<<20, 64<<20) // large, but small beside the heap in use
		wait(2 * trimPeriod)
		if n := frees.Load(); n != 0 {
			t.Fatalf("freed %d times with 8 MiB free beside 64 MiB in use", n)
		}
		set(8<<20, 2<<20) // a crowd has gone
		wait(trimPeriod)
		if n := frees.Load(); n != 1 {
			t.Fatalf("freed %d times within a period of 8 MiB going free, want 1", n)
		}
		set(8<<20, 2<<20) // churn: again at once
		wait(trimPeriod)
		if n := frees.Load(); n != 1 {
			t.Fatalf("freed %d times within %v, want 1", n, trimMinInterval)
		}
		wait(trimMinInterval)
		if n := frees.Load(); n != 2 {
			t.Fatalf("freed %d times after %v more, want 2", n, trimMinInterval)
		}
		cancel()
		<-done
	})
}
