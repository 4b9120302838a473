package main

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// pingCPU is where client, proxy and backend share one CPU during ping:
// unpinned medians move 2.5x between rounds in a VM, pinned ones ±3%.
const pingCPU = 0

// pingScenario: 1-byte request/response over one kept connection from a
// blocking raw socket on a locked, pinned OS thread (no netpoller in the
// client's path).
type pingScenario struct{}

func (pingScenario) name() string { return "ping" }
func (pingScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "p50_us", Unit: "µs", Better: LowerBetter, Chart: true},
		{Name: "p99_us", Unit: "µs", Better: LowerBetter},
		{Name: "p999_us", Unit: "µs", Better: LowerBetter},
		{Name: "added_us", Unit: "µs", Better: LowerBetter, Chart: true, NoRatio: true},
		{Name: "cpu_us_per_rt", Unit: "µs", Better: LowerBetter},
	}
}
func (pingScenario) rounds(o options) int { return o.rounds }
func (pingScenario) applies(*system) bool { return true }

// finish pairs each round with direct's same round: added = p50 - direct p50.
func (pingScenario) finish(sr *ScenarioResult) { sr.addedOverDirect("p50_us", "added_us") }

func (pingScenario) run(h *harness, s *system) (map[string]float64, error) {
	one := []int{pingCPU}
	others := append([]int{h.backends.pid}, s.pids()...)
	if err := pinProcs(others, one); err != nil {
		return nil, err
	}
	defer func() {
		_ = pinProcs([]int{h.backends.pid}, h.layout.backends)
		_ = pinProcs(s.pids(), h.layout.proxy)
	}()
	type result struct {
		lat []float64
		err error
	}
	done := make(chan result, 1)
	var lat []float64
	cpu, err := measureCPU(s, func() error {
		go func() {
			unpin, err := pinCurrentThread(one, h.layout.loadgen)
			if err != nil {
				done <- result{err: err}
				return
			}
			defer unpin()
			l, err := pingPong(s.addr(routeEcho), h.opts.pingCount, h.opts.pingCount/10)
			done <- result{l, err}
		}()
		r := <-done
		lat = r.lat
		return r.err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(lat)
	out := map[string]float64{
		"p50_us":  percentile(lat, 50),
		"p99_us":  percentile(lat, 99),
		"p999_us": percentile(lat, 99.9),
	}
	if isProxy(s) {
		out["cpu_us_per_rt"] = cpu * 1e6 / float64(len(lat))
	}
	return out, nil
}

// pingMaxTime bounds one ping run whatever the count.
const pingMaxTime = 30 * time.Second

// pingPong does warmup+n round trips of one byte and returns the last n
// latencies in µs. Must run on a locked OS thread: it blocks in syscalls.
func pingPong(addr string, n, warmup int) ([]float64, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	tv := unix.Timeval{Sec: 2}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	if err := retryEINTR(func() error {
		return unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	}); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	lat := make([]float64, 0, n)
	b := []byte{'x'}
	deadline := time.Now().Add(pingMaxTime)
	for i := range warmup + n {
		t0 := time.Now()
		if err := retryEINTR(func() error { _, err := unix.Write(fd, b); return err }); err != nil {
			return nil, fmt.Errorf("write: %w", err)
		}
		if err := retryEINTR(func() error {
			m, err := unix.Read(fd, b)
			if err == nil && m == 0 {
				return errors.New("connection closed")
			}
			return err
		}); err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		if i >= warmup {
			lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
		}
		if t0.After(deadline) {
			break
		}
	}
	return lat, nil
}

// retryEINTR retries a syscall interrupted by Go's preemption signals.
func retryEINTR(f func() error) error {
	for {
		err := f()
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
