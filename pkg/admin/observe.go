package admin

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
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
	descRecoveryWaits = desc("l4lb_client_recovery_waits_total",
		"Waits of TCP clients whose pool was all down once their dials failed: held, dialing nothing, within the pool's connect_budget for a backend to come back; by how the wait ended: served (a backend came back and the client was dialed), timeout (the budget ran out: refused as no_backend), left (the client went away).",
		"listener", "result")
	descRouteClients = desc("l4lb_route_connections_total",
		"TCP clients of a listener with SNI routes that a route took, by the route's name (its pool's unless named); those of the listener's own pool are in l4lb_inspect_total.",
		"listener", "route")
	descInspect = desc("l4lb_inspect_total",
		"ClientHello inspections of listeners with SNI routes, by how they ended: routed, unmatched (a ClientHello no route takes, or without a name: the listener's pool), not_tls, malformed, too_large, incomplete (part of a ClientHello at inspect_timeout, or closed within it), server_first (nothing at inspect_timeout).",
		"listener", "result")
	descHandedOver = desc("l4lb_upgrade_connections_handed_total",
		"Established connections a binary upgrade moved, by listener: TCP relays and clients queued for a slot, or UDP sessions; direction out: passed to the next process (this one is the old one), in: taken from the previous one.",
		"listener", "direction")
	descSources = desc("l4lb_policy_sources",
		"Sources the listener's per-source limits track now (max_connections_per_source, rate_per_source): client addresses, or their prefixes of source_ipv4_prefix / source_ipv6_prefix bits.", "listener")
	descBackendDraining = desc("l4lb_backend_draining",
		"1 while an operator drains the backend (no new connections; the rest are reset at the deadline), until it is enabled.", backendLabels...)
	descBackendWeight = desc("l4lb_backend_weight",
		"The backend's weight for new picks: the configured one or an operator's.", backendLabels...)
	descServingBackups = desc("l4lb_pool_serving_backups",
		"1 while the pool sends new clients to its backups (backup = true): no primary is usable and a backup is.", "pool")
	descBackendBackup = desc("l4lb_backend_backup",
		"1 for a backup backend (backup = true), which takes new clients only while no primary of its pool is usable; 0 for a primary.", backendLabels...)
	descPortsExhausted = desc("l4lb_pool_ports_exhausted_total",
		"Client dials that found no local port toward their backend (EADDRNOTAVAIL from every source address): local trouble, no backend blamed.", "pool")
	descAccessDropped = desc("l4lb_access_log_dropped_total",
		"Access log records lost: the queue was full (the writer fell behind) or writing them failed. 0 with the access log off.")
)

func describeObservability(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClientCloses, descConnectTime, descBuildInfo, descAccessDropped,
		descQueued, descRecoveryWaits, descRouteClients, descInspect, descHandedOver, descSources, descBackendDraining, descBackendWeight, descPortsExhausted,
		descServingBackups, descBackendBackup} {
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
		for r := range relay.NumCloseReasons {
			ch <- prometheus.MustNewConstMetric(descClientCloses, prometheus.CounterValue, float64(lc.Closed[r]), lc.Name, r.String())
		}
		for i, r := range relay.QueueResults {
			ch <- prometheus.MustNewConstMetric(descQueued, prometheus.CounterValue, float64(lc.Queued[i]), lc.Name, r)
			ch <- prometheus.MustNewConstMetric(descRecoveryWaits, prometheus.CounterValue, float64(lc.RecoveryWaits[i]), lc.Name, r)
		}
		ch <- prometheus.MustNewConstMetric(descSources, prometheus.GaugeValue, float64(lc.Sources), lc.Name)
	}
	for _, lr := range s.Routes() {
		for name, n := range lr.Routes {
			ch <- prometheus.MustNewConstMetric(descRouteClients, prometheus.CounterValue, float64(n), lr.Name, name)
		}
		for i, r := range relay.InspectResults {
			ch <- prometheus.MustNewConstMetric(descInspect, prometheus.CounterValue, float64(lr.Results[i]), lr.Name, r)
		}
	}
	for _, h := range s.Handovers() {
		ch <- prometheus.MustNewConstMetric(descHandedOver, prometheus.CounterValue, float64(h.Out), h.Name, "out")
		ch <- prometheus.MustNewConstMetric(descHandedOver, prometheus.CounterValue, float64(h.In), h.Name, "in")
	}
	ch <- prometheus.MustNewConstMetric(descAccessDropped, prometheus.CounterValue, float64(s.AccessLogDropped()))
}

// connectBounds are pool.ConnectBuckets, for the buckets' upper bounds to
// point to.
var connectBounds = pool.ConnectBuckets

// histogramSeries is a backend's connect-time histogram of one scrape: the
// dto filled straight from the cumulative counts, buckets in ascending
// order as prometheus.NewConstHistogram sorts them, no +Inf bucket (the
// count is its value).
type histogramSeries struct {
	labels  *[2]*dto.LabelPair // {backend, pool}; a pointer keeps backendSeries in 4 KiB
	count   uint64
	sum     float64
	cum     [len(pool.ConnectBuckets)]uint64
	buckets [len(pool.ConnectBuckets)]dto.Bucket
	ptrs    [len(pool.ConnectBuckets)]*dto.Bucket
	h       dto.Histogram
}

func (s *histogramSeries) Desc() *prometheus.Desc { return descConnectTime }

func (s *histogramSeries) Write(out *dto.Metric) error {
	out.Label = s.labels[:]
	out.Histogram = &s.h
	return nil
}

// send sets s from h and sends it on ch.
func (s *histogramSeries) send(ch chan<- prometheus.Metric, h pool.ConnectHistogram, labels *[2]*dto.LabelPair) {
	s.labels = labels
	s.count, s.sum, s.cum = h.Count, h.Sum.Seconds(), h.Cumulative
	for i := range s.buckets {
		s.buckets[i].CumulativeCount = &s.cum[i]
		s.buckets[i].UpperBound = &connectBounds[i]
		s.ptrs[i] = &s.buckets[i]
	}
	s.h.SampleCount, s.h.SampleSum, s.h.Bucket = &s.count, &s.sum, s.ptrs[:]
	ch <- s
}
