package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"
)

// bulkWrite is the sender's write size (the anchor method uses >= 128 KiB).
const bulkWrite = 256 << 10

// bulkScenario: P streams from a Go sender to the Go sink, 1 and 8 streams.
// Throughput counts what the sink confirms it received; the proxy's CPU
// per GB comes from /proc/PID/stat over its process tree.
type bulkScenario struct{}

func (bulkScenario) name() string { return "bulk" }
func (bulkScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "gbps_1", Unit: "Gbit/s", Better: HigherBetter, Chart: true},
		{Name: "gbps_8", Unit: "Gbit/s", Better: HigherBetter, Chart: true},
		{Name: "cpu_s_per_gb_1", Unit: "s/GB", Better: LowerBetter, Chart: true},
		{Name: "cpu_s_per_gb_8", Unit: "s/GB", Better: LowerBetter},
	}
}
func (bulkScenario) rounds(o options) int      { return o.rounds }
func (bulkScenario) applies(*system) bool      { return true }
func (bulkScenario) finish(sr *ScenarioResult) {}

func (bulkScenario) run(h *harness, s *system) (map[string]float64, error) {
	out := map[string]float64{}
	for _, streams := range []int{1, 8} {
		var bytes int64
		var elapsed time.Duration
		cpu, err := measureCPU(s, func() error {
			var err error
			bytes, elapsed, err = bulkSend(s.addr(routeBulk), streams, h.opts.runTime)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("%d streams: %w", streams, err)
		}
		gb := float64(bytes) / 1e9
		out[fmt.Sprintf("gbps_%d", streams)] = gb * 8 / elapsed.Seconds()
		if isProxy(s) && gb > 0 {
			out[fmt.Sprintf("cpu_s_per_gb_%d", streams)] = cpu / gb
		}
	}
	return out, nil
}

// bulkSend writes for d on each of streams connections, half-closes, and
// waits for the sink's byte count. It returns the bytes the sink confirmed
// and the time until the last confirmation.
func bulkSend(addr string, streams int, d time.Duration) (int64, time.Duration, error) {
	start := time.Now()
	stop := start.Add(d)
	var (
		mu    sync.Mutex
		total int64
		first error
		wg    sync.WaitGroup
	)
	for range streams {
		wg.Go(func() {
			n, err := bulkStream(addr, stop)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil && first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	return total, time.Since(start), first
}

func bulkStream(addr string, stop time.Time) (int64, error) {
	c, err := dialLoopback(addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, bulkWrite)
	_ = c.SetDeadline(stop.Add(15 * time.Second))
	var sent int64
	for time.Now().Before(stop) {
		n, err := c.Write(buf)
		sent += int64(n)
		if err != nil {
			return 0, fmt.Errorf("write: %w", err)
		}
	}
	if err := c.CloseWrite(); err != nil {
		return 0, err
	}
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, fmt.Errorf("sink count: %w", err)
	}
	got := int64(binary.BigEndian.Uint64(b[:]))
	if got != sent {
		return got, fmt.Errorf("sink got %d bytes of %d sent", got, sent)
	}
	return got, nil
}
