package main

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

const (
	connWorkers = 32
	connMsg     = 64
)

// connScenario: 32 workers each loop connect, send 64 B, read the 64 B
// reply, close. Connections per second, p50/p99 of connect+reply, the
// proxy's CPU per connection, and how often per connection its threads
// went to sleep: each sleep is a wake-up that the load generator's or a
// backend's core pays for, which is how a proxy that spends less CPU can
// still be slower. Where the load generator has a core of its own, the
// share of that core it kept busy says what the rate measures: at 100%
// the row is the load generator's limit, and proxies differ only in the
// work (wake-ups) they hand to that core.
type connScenario struct{}

func (connScenario) name() string { return "conn" }
func (connScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "conn_per_s", Unit: "conn/s", Better: HigherBetter, Chart: true},
		{Name: "p50_us", Unit: "µs", Better: LowerBetter},
		{Name: "p99_us", Unit: "µs", Better: LowerBetter},
		{Name: "cpu_us_per_conn", Unit: "µs", Better: LowerBetter, Chart: true},
		{Name: "sleeps_per_conn", Unit: "sleeps", Better: LowerBetter, NoRatio: true},
		{Name: "errors", Unit: "", Better: LowerBetter, NoRatio: true},
		{Name: "loadgen_busy_pct", Unit: "%", Better: LowerBetter, NoRatio: true},
	}
}
func (connScenario) rounds(o options) int { return o.rounds }
func (connScenario) applies(*system) bool { return true }
func (connScenario) finish(sr *ScenarioResult) {
	if note, ok := accessLogNote(sr); ok {
		sr.Notes = append(sr.Notes, note)
	}
	if note, ok := storeNote(sr); ok {
		sr.Notes = append(sr.Notes, note)
	}
	if note, ok := policyNote(sr); ok {
		sr.Notes = append(sr.Notes, note)
	}
}

func (connScenario) run(h *harness, s *system) (map[string]float64, error) {
	var res connResult
	storeDone := storeSample(h, s) // l4lb-redis: what its redis-server did meanwhile
	sleptBefore := voluntarySwitches(s.pids())
	loadgenBefore := readCPUTimes(h.layout.loadgen)
	cpu, _ := measureCPU(s, func() error {
		res = connLoad(s.addr(routeEcho), connWorkers, h.opts.runTime, 0, nil, nil)
		return nil
	})
	storeDone(res.ok)
	if res.ok == 0 {
		return nil, fmt.Errorf("no connection succeeded (%d errors)", res.errors)
	}
	slices.Sort(res.latUS)
	out := map[string]float64{
		"conn_per_s": float64(res.ok) / res.elapsed.Seconds(),
		"p50_us":     percentile(res.latUS, 50),
		"p99_us":     percentile(res.latUS, 99),
		"errors":     float64(res.errors),
	}
	if busy, ok := busyShare(loadgenBefore, readCPUTimes(h.layout.loadgen)); ok && h.layout.pinned {
		out["loadgen_busy_pct"] = busy
	}
	if isProxy(s) {
		out["cpu_us_per_conn"] = cpu * 1e6 / float64(res.ok)
		slept := voluntarySwitches(s.pids()) - sleptBefore
		out["sleeps_per_conn"] = float64(slept) / float64(res.ok)
	}
	return out, nil
}

type connResult struct {
	ok, errors int
	latUS      []float64
	elapsed    time.Duration
}

// connEvent is one connection as the failover scenario sees it.
type connEvent struct {
	at  time.Time // when the connection started
	ok  bool
	tag byte // first byte of the reply
}

// connLoad runs workers until d has passed or stop is closed. pace > 0
// sleeps between a worker's connections (steady load); onEvent, when
// non-nil, sees every connection's outcome (from many goroutines).
func connLoad(addr string, workers int, d, pace time.Duration, stop <-chan struct{}, onEvent func(connEvent)) connResult {
	return connLoadWith(func(req, rep []byte) error { return connOnce(addr, req, rep) }, workers, d, pace, stop, onEvent)
}

// connLoadWith is connLoad with its own connection: once makes one, sends
// req and fills rep (from many goroutines), e.g. over TLS (scenario_sni.go).
func connLoadWith(once func(req, rep []byte) error, workers int, d, pace time.Duration, stop <-chan struct{}, onEvent func(connEvent)) connResult {
	start := time.Now()
	end := start.Add(d)
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return !time.Now().Before(end)
		}
	}
	var (
		mu  sync.Mutex
		res connResult
		wg  sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			req := make([]byte, connMsg)
			rep := make([]byte, connMsg)
			var lat []float64
			ok, bad := 0, 0
			for !stopped() {
				t0 := time.Now()
				rep[0] = 0
				err := once(req, rep)
				if err == nil {
					ok++
					lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
				} else {
					bad++
				}
				if onEvent != nil {
					onEvent(connEvent{at: t0, ok: err == nil, tag: rep[0]})
				}
				if pace > 0 {
					time.Sleep(pace)
				} else if err != nil {
					time.Sleep(time.Millisecond) // do not spin on a refusing port
				}
			}
			mu.Lock()
			res.ok += ok
			res.errors += bad
			res.latUS = append(res.latUS, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

func connOnce(addr string, req, rep []byte) error {
	c, err := dialLoopback(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(req); err != nil {
		return err
	}
	_, err = io.ReadFull(c, rep)
	return err
}
