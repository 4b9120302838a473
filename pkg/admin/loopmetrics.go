package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/l4lb/l4lb/pkg/server"
)

// Per-loop metrics: an event loop is the unit of capacity, so its
// utilisation is the saturation signal, and its connection count shows
// how evenly SO_REUSEPORT spreads clients.
var (
	descLoopBusy = desc("l4lb_loop_busy_seconds_total",
		"Time the event loop spent handling events, timers and tasks rather than waiting; its rate is the loop's utilisation (1: saturated).", "loop")
	descLoopEvents = desc("l4lb_loop_events_total",
		"Readiness events the event loop handled.", "loop")
	descLoopSleeps = desc("l4lb_loop_sleeps_total",
		"Times the event loop ran out of work and waited for events: each may put its thread to sleep and make the next sender wake it.", "loop")
	descLoopCoalesced = desc("l4lb_loop_coalesced_waits_total",
		"Waits that slept out a wake_coalesce window to take several connections' events in one wake-up.", "loop")
	descLoopConns = desc("l4lb_loop_connections",
		"TCP client connections the event loop holds now.", "loop")
)

func describeLoops(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoopBusy, descLoopEvents, descLoopSleeps, descLoopCoalesced, descLoopConns} {
		ch <- d
	}
}

func collectLoops(ch chan<- prometheus.Metric, s *server.Server) {
	for _, st := range s.LoopStats() {
		id := strconv.Itoa(st.ID)
		ch <- prometheus.MustNewConstMetric(descLoopBusy, prometheus.CounterValue, st.Busy.Seconds(), id)
		ch <- prometheus.MustNewConstMetric(descLoopEvents, prometheus.CounterValue, float64(st.Events), id)
		ch <- prometheus.MustNewConstMetric(descLoopSleeps, prometheus.CounterValue, float64(st.Sleeps), id)
		ch <- prometheus.MustNewConstMetric(descLoopCoalesced, prometheus.CounterValue, float64(st.Coalesced), id)
		ch <- prometheus.MustNewConstMetric(descLoopConns, prometheus.GaugeValue, float64(st.Conns), id)
	}
}
