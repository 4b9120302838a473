package health

import (
	"context"
	"net"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// cpuMicros is this process's user and system CPU so far, in µs.
func cpuMicros(b *testing.B) (user, sys float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec)*1e6 + float64(t.Usec) }
	return tv(ru.Utime), tv(ru.Stime)
}

// acceptAndClose listens on 127.0.0.1 and closes what it accepts.
func acceptAndClose(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkCheck prices one check, one after another on one goroutine:
// ns/op is its wall time, cpu-µs/check the process's user and system CPU
// over the run divided by the checks (getrusage). The listener is in this
// process, so a passing connect's cpu-µs/check includes the accept and
// close on the backend's side; bench/healthscale measures the checker
// alone, with the listeners in a child process.
func BenchmarkCheck(b *testing.B) {
	live := acceptAndClose(b)
	refused := testnet.FreeAddr(b)
	noKeepAlive := (&net.Dialer{KeepAlive: -1}).DialContext // as pkg/dialer's
	for _, bc := range []struct {
		name  string
		check Check
		want  Result
	}{
		{"TCPConnect", TCPCheck(nil, live, nil), Pass},
		{"TCPConnectNoKeepAlive", TCPCheck(noKeepAlive, live, nil), Pass},
		{"TCPRefused", TCPCheck(nil, refused, nil), Fail},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			u0, s0 := cpuMicros(b)
			for b.Loop() {
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				if r := bc.check(ctx).Result; r != bc.want {
					b.Fatalf("check: %v, want %v", r, bc.want)
				}
				cancel()
			}
			u1, s1 := cpuMicros(b)
			b.ReportMetric((u1-u0+s1-s0)/float64(b.N), "cpu-µs/check")
			b.ReportMetric((u1-u0)/float64(b.N), "user-µs/check")
			b.ReportMetric((s1-s0)/float64(b.N), "sys-µs/check")
		})
	}
}

// BenchmarkProberMemory runs 1,000 probers making TCP connect checks
// every second, by Run (a goroutine each) and on a Scheduler, and reports
// what they hold after 2.5 intervals above what the process held before:
// goroutines, goroutine stack bytes per prober (sampled, not after a GC,
// which shrinks stacks) and live heap bytes per prober (after a GC).
// ns/op is the whole run, 2.5 s and the set-up; -benchtime 1x runs it once.
func BenchmarkProberMemory(b *testing.B) {
	const n = 1000
	addr := acceptAndClose(b)
	for _, mode := range []string{"Run", "Scheduler"} {
		b.Run(mode, func(b *testing.B) {
			var g, st, h float64
			for b.Loop() {
				g, st, h = proberMemory(b, mode, n, addr)
			}
			b.ReportMetric(g, "goroutines")
			b.ReportMetric(st/n, "stack-B/prober")
			b.ReportMetric(h/n, "heap-B/prober")
		})
	}
}

// proberMemory runs n probers for 2.5 s and returns the goroutines, stack
// bytes and live heap bytes they added.
func proberMemory(b *testing.B, mode string, n int, addr string) (goroutines, stacks, heap float64) {
	runtime.GC()
	g0, st0, h0 := memSample()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var waits []func()
	s := NewScheduler(0)
	for range n {
		p, err := New(testKey, Config{Enabled: true, Interval: time.Second}.withDefaults(), TCPCheck(nil, addr, nil), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if mode == "Run" {
			wg.Go(func() { p.Run(ctx) })
		} else {
			waits = append(waits, s.Add(ctx, p))
		}
	}
	time.Sleep(2500 * time.Millisecond)
	g1, st1, _ := memSample()
	runtime.GC()
	_, _, h1 := memSample()
	cancel()
	wg.Wait()
	for _, w := range waits {
		w()
	}
	return float64(g1) - float64(g0), float64(st1) - float64(st0), float64(h1) - float64(h0)
}

func memSample() (goroutines, stacks, heap uint64) {
	s := []metrics.Sample{
		{Name: "/sched/goroutines:goroutines"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
}
