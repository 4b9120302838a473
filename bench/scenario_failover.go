package main

import (
	"fmt"
	"net/netip"
	"sync"
	"time"
)

const (
	failoverBackendCount = 3
	failoverWorkers      = 4
	failoverPace         = 2 * time.Millisecond // ~2,000 conn/s in all
	failoverWarm         = 500 * time.Millisecond
	failoverKilled       = 0 // index of the backend that dies (reply tag 1)
	// dialsQuietGap: dials to the dead backend have stopped once this long
	// passes without one; periodic health checks leave such gaps, client
	// traffic at ~2,000 conn/s does not.
	dialsQuietGap = 300 * time.Millisecond
)

// failoverScenario: steady short connections through 3 tagged echo
// backends; one is SIGKILLed (its port is then closed), restarted after a
// while, and the client watches: how many connections failed, when the last
// failure was, and how long after the restart the backend's tag reappears.
// A packet socket on lo counts the SYNs the proxy still sends to the dead
// port: how many, and how long until they stop.
// Each system uses its own detection (see README.md).
type failoverScenario struct{}

func (failoverScenario) name() string { return "failover" }
func (failoverScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "failures", Unit: "conns", Better: LowerBetter, Chart: true, NoRatio: true},
		{Name: "last_failure_ms", Unit: "ms", Better: LowerBetter, NoRatio: true},
		{Name: "dials_stop_ms", Unit: "ms", Better: LowerBetter, Chart: true, NoRatio: true},
		{Name: "dead_dials", Unit: "SYNs", Better: LowerBetter, NoRatio: true},
		{Name: "recover_ms", Unit: "ms", Better: LowerBetter, Chart: true, NoRatio: true},
		{Name: "conns", Unit: "conns", Better: HigherBetter, NoRatio: true},
	}
}
func (failoverScenario) rounds(o options) int      { return o.rounds }
func (failoverScenario) applies(s *system) bool    { return isProxy(s) }
func (failoverScenario) finish(sr *ScenarioResult) {}

func (failoverScenario) run(h *harness, s *system) (map[string]float64, error) {
	k := failoverKilled
	tag := byte(k + 1)
	var (
		mu                    sync.Mutex
		killAt, restartAt     time.Time
		failures              int
		lastFail, recoveredAt time.Time
		seenBeforeKill        bool
		recovered             = make(chan struct{})
	)
	onEvent := func(ev connEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case killAt.IsZero():
			if ev.ok && ev.tag == tag {
				seenBeforeKill = true
			}
		case !ev.ok:
			failures++
			if ev.at.After(lastFail) {
				lastFail = ev.at
			}
		case !restartAt.IsZero() && ev.tag == tag && recoveredAt.IsZero():
			recoveredAt = ev.at
			close(recovered)
		}
	}
	stop := make(chan struct{})
	maxTotal := failoverWarm + h.opts.failDead + h.opts.failRecoverMax + time.Second
	loadDone := make(chan connResult, 1)
	go func() {
		loadDone <- connLoad(s.addr(routeFailover), failoverWorkers, maxTotal, failoverPace, stop, onEvent)
	}()
	finishLoad := func() connResult { close(stop); return <-loadDone }

	// Dials to the dead backend leave no trace but their SYNs: watch them
	// (root only; without it the two dial metrics are left out).
	var watch *synWatch
	if port, err := portOf(s.route(routeFailover).backends[k]); err == nil {
		if watch, err = newSYNWatch(port); err != nil {
			watch = nil
		} else {
			defer watch.close()
		}
	}
	time.Sleep(failoverWarm)
	mu.Lock()
	killAt = time.Now()
	mu.Unlock()
	h.sup.kill(s.failoverBackends[k])
	time.Sleep(h.opts.failDead)
	deadUntil := time.Now()
	c, err := h.startBackend(fmt.Sprintf("%s-failover-%d", s.spec.name, k), h.failoverBackendArgs(s, k)...)
	if err != nil {
		finishLoad()
		return nil, fmt.Errorf("restart backend: %w", err)
	}
	s.failoverBackends[k] = c
	mu.Lock()
	restartAt = time.Now()
	mu.Unlock()

	var runErr error
	select {
	case <-recovered:
	case <-time.After(h.opts.failRecoverMax):
		runErr = fmt.Errorf("backend not back within %v (recover_ms is that bound)", h.opts.failRecoverMax)
	}
	res := finishLoad()

	mu.Lock()
	defer mu.Unlock()
	if !seenBeforeKill {
		return nil, fmt.Errorf("backend %d got no traffic before the kill", k)
	}
	out := map[string]float64{
		"failures":        float64(failures),
		"last_failure_ms": 0,
		"conns":           float64(res.ok + res.errors),
	}
	if !lastFail.IsZero() {
		out["last_failure_ms"] = ms(max(0, lastFail.Sub(killAt)))
	}
	if watch != nil {
		syns := watch.between(killAt, deadUntil)
		out["dead_dials"] = float64(len(syns))
		out["dials_stop_ms"] = ms(dialsStop(syns, killAt, deadUntil, dialsQuietGap))
	}
	if recoveredAt.IsZero() {
		out["recover_ms"] = ms(h.opts.failRecoverMax)
	} else {
		out["recover_ms"] = ms(max(0, recoveredAt.Sub(restartAt)))
	}
	return out, runErr
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

func portOf(hostport string) (int, error) {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return 0, err
	}
	return int(ap.Port()), nil
}
