package reactor

import (
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// How often the runtime preempts a busy loop that holds its P: a loop
// fed a task every few tens of microseconds (so it holds its P and waits
// raw between them) for each 10 ms of the benchmark, with the signals
// the runtime preempts with (SIGURG, which os/signal also delivers)
// counted and reported per second. With the garbage collector off, every
// one is sysmon ending a time slice; yieldIfDue keeps the loop from ever
// reaching one (holdp.go), so the figure is near zero, against about a
// hundred a second without it.
func BenchmarkHeldLoopPreemptions(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("a loop holds a P only with a spare one beside it")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	l, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	l.Start()
	defer func() { l.Stop(); l.Wait() }()

	var stop atomic.Bool
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for !stop.Load() {
			l.Post(func() {})
			time.Sleep(20 * time.Microsecond)
		}
	}()
	defer func() { stop.Store(true); <-fed }()

	sigs := make(chan os.Signal, 4096)
	signal.Notify(sigs, syscall.SIGURG)
	defer signal.Stop(sigs)
	start := time.Now()
	for b.Loop() {
		time.Sleep(10 * time.Millisecond)
	}
	b.ReportMetric(float64(len(sigs))/time.Since(start).Seconds(), "preempts/s")
}
