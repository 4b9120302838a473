package admin

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/l4lb/l4lb/pkg/loop"
	"github.com/l4lb/l4lb/pkg/pool"
)

// Metrics of issue 12's observability: how clients ended, how long
// backends take to accept, what build runs, and the access log's losses.
var (
	descClientCloses = desc("l4lb_client_connections_closed_total",
		"TCP client connections ended, by reason: completed, client_reset, backend_reset, idle_timeout, shutdown, drained (relayed); "+
			"connection_cap, no_backend, local_error, loop, client_left, denied, source_connections, source_rate, backend_cap, "+
			"proxy_untrusted, proxy_header, proxy_timeout (refused). Counted with the access log on or off.",
		"listener", "reason")
	descConnectTime = desc("l4lb_backend_connect_seconds",
		"Time from connect(2) to the socket turning writable, of client dials that connected, on the dialing event loop's clock.",
		"pool", "backend")
	descBuildInfo = desc("l4lb_build_info",
		"Always 1; the labels say which build runs.", "version", "goversion")
	descQueued = desc("l4lb_client_queued_total",
		"TCP clients that waited for a backend slot (every usable backend at its max_connections, queue_timeout set), by how the wait ended: served (dialed once the pool had room again), timeout, left (the client went away).",
		"listener", "result")
	descSources = desc("l4lb_policy_sources",
		"Sources the listener's per-source limits track now (max_connections_per_source, rate_per_source): client addresses, or their prefixes of source_ipv4_prefix / source_ipv6_prefix bits.", "listener")
	descBackendDraining = desc("l4lb_backend_draining",
		"1 while an operator drains the backend (no new connections; the rest are reset at the deadline), until it is enabled.", backendLabels...)
	descBackendWeight = desc("l4lb_backend_weight",
		"The backend's weight for new picks: the configured one or an operator's.", backendLabels...)
	descPortsExhausted = desc("l4lb_pool_ports_exhausted_total",
		"Client dials that found no local port toward their backend (EADDRNOTAVAIL from every source address): local trouble, no backend blamed.", "pool")
	descAccessDropped = desc("l4lb_access_log_dropped_total",
		"Access log records lost: the queue was full (the writer fell behind) or writing them failed. 0 with the access log off.")
)

func describeObservability(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClientCloses, descConnectTime, descBuildInfo, descAccessDropped,
		descQueued, descSources, descBackendDraining, descBackendWeight, descPortsExhausted} {
		ch <- d
	}
}

func (c collector) collectObservability(ch chan<- prometheus.Metric) {
	version := c.src.Version
	if version == "" {
		version = "unknown"
	}
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, version, runtime.Version())
	s := c.src.Server
	if s == nil {
		return
	}
	for _, lc := range s.Closes() {
		for r := range loop.NumCloseReasons {
			ch <- prometheus.MustNewConstMetric(descClientCloses, prometheus.CounterValue, float64(lc.Closed[r]), lc.Name, r.String())
		}
		for i, r := range loop.QueueResults {
			ch <- prometheus.MustNewConstMetric(descQueued, prometheus.CounterValue, float64(lc.Queued[i]), lc.Name, r)
		}
		ch <- prometheus.MustNewConstMetric(descSources, prometheus.GaugeValue, float64(lc.Sources), lc.Name)
	}
	ch <- prometheus.MustNewConstMetric(descAccessDropped, prometheus.CounterValue, float64(s.AccessLogDropped()))
}

// collectConnectTimes exports backend b's connect-time histogram.
func collectConnectTimes(ch chan<- prometheus.Metric, poolName string, b *pool.Backend) {
	h := b.ConnectTimes()
	buckets := make(map[float64]uint64, len(pool.ConnectBuckets))
	for i, le := range pool.ConnectBuckets {
		buckets[le] = h.Cumulative[i]
	}
	ch <- prometheus.MustNewConstHistogram(descConnectTime, h.Count, h.Sum.Seconds(), buckets, poolName, b.Addr)
}
