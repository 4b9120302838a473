package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/l4lb/l4lb/pkg/fleet"
	"github.com/l4lb/l4lb/pkg/loop"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxy"
	"github.com/l4lb/l4lb/pkg/splice"
)

// Sources are what the metrics are read from.
type Sources struct {
	// Pools are the pools served; Live, when set, gives the current ones
	// instead (a reload replaces them).
	Pools  []*pool.Pool
	Live   func() []*pool.Pool
	Config *ConfigState // nil: no reloads (tests, an embedded handler)
	Server *proxy.Server
	Pipes  *splice.PipePool
	// MaxConnections is the effective global cap.
	MaxConnections int
	// Version is l4lb's version, for l4lb_build_info.
	Version string
	// Cluster is the fleet's shared breaker store; nil with the
	// process's own (no l4lb_cluster_* metrics).
	Cluster *fleet.Store
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	backendLabels = []string{"pool", "backend"}

	descBackendUp     = desc("l4lb_backend_up", "1 when the backend is usable: enabled, health-up and breaker closed.", backendLabels...)
	descBreakerOpen   = desc("l4lb_breaker_open", "1 while the backend's breaker is open.", backendLabels...)
	descBreakerGen    = desc("l4lb_breaker_generation", "Current breaker generation of the backend.", backendLabels...)
	descHealthUp      = desc("l4lb_health_up", "1 while the backend's active health checks pass.", backendLabels...)
	descDisabled      = desc("l4lb_backend_disabled", "1 while the backend is manually disabled.", backendLabels...)
	descDials         = desc("l4lb_backend_dials_total", "Dials to the backend by kind (client, probe, force, health) and result (success, failure).", "pool", "backend", "kind", "result")
	descTrips         = desc("l4lb_breaker_trips_total", "Times this instance tripped the backend's breaker.", backendLabels...)
	descProbeFailures = desc("l4lb_breaker_probe_failures_total", "Failed recovery probes: the breaker alert signal.", backendLabels...)
	descStale         = desc("l4lb_breaker_stale_results_total", "Dial results ignored because the dial began before a breaker transition.", backendLabels...)
	descActive        = desc("l4lb_connections_active", "Connections on the backend now: dials in flight and open relays.", backendLabels...)
	descBytes         = desc("l4lb_bytes_total", "Bytes relayed, by direction (to_backend, to_client).", "pool", "backend", "direction")
	descClientConns   = desc("l4lb_client_connections_total", "Client connections by result: ok, failed (no backend could be dialed), rejected (cap, local trouble).", "listener", "result")
	descAcceptErrors  = desc("l4lb_accept_errors_total", "Failed accept calls (e.g. out of file descriptors); the listener backs off and retries.", "listener")
	descRelayBytes    = desc("l4lb_relay_bytes_total", "Bytes relayed by how they moved: splice (zero-copy) or copy.", "path")
	descPipes         = desc("l4lb_splice_pipes", "Splice pipes in existence, by state (busy: holding a relay's data, idle: pooled).", "state")
	descClientsOpen   = desc("l4lb_client_connections_open", "Client connections being served now, across listeners.")
	descClientsMax    = desc("l4lb_client_connections_max", "The global connection cap (max_connections).")
	descAdminOpen     = desc("l4lb_admin_connections_open", "Connections to this admin endpoint open now.")
	descAdminMax      = desc("l4lb_admin_connections_max", "The admin endpoint's connection cap ([admin] max_connections).")
	descUDPActive     = desc("l4lb_udp_sessions_active", "UDP sessions open now (a client address and port relayed to one backend).", "listener")
	descUDPSessions   = desc("l4lb_udp_sessions_total", "UDP sessions ended, by result: timeout, responses, evicted (max_sessions), refused (ICMP), moved (backend left rotation), error, shutdown.", "listener", "result")
	descUDPDatagrams  = desc("l4lb_udp_datagrams_total", "UDP datagrams relayed, by direction (to_backend, to_client).", "listener", "direction")
	descUDPBytes      = desc("l4lb_udp_bytes_total", "UDP payload bytes relayed, by direction (to_backend, to_client).", "listener", "direction")
	descUDPDrops      = desc("l4lb_udp_drops_total", "UDP datagrams dropped, by reason: no_backend, session_cap, local_error, backend_send, client_send, refused, loop, denied.", "listener", "reason")
	descUDPUnanswered = desc("l4lb_udp_unanswered_total", "UDP sessions whose first datagram had no reply within the pool's reply_timeout.", "listener")
	descAdminRejected = desc("l4lb_admin_connections_rejected_total", "Admin connections closed at once because max_connections were open.")
)

// collector reads every metric from its sources at scrape time.
type collector struct {
	src   Sources
	conns *limitListener // nil: no connection cap (Handler used alone)
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBackendUp, descBreakerOpen, descBreakerGen, descHealthUp, descDisabled,
		descDials, descTrips, descProbeFailures, descStale, descActive, descBytes, descClientConns,
		descAcceptErrors, descRelayBytes, descPipes, descClientsOpen, descClientsMax,
		descAdminOpen, descAdminMax, descAdminRejected,
		descUDPActive, descUDPSessions, descUDPDatagrams, descUDPBytes, descUDPDrops, descUDPUnanswered,
		descReloads, descConfigInfo} {
		ch <- d
	}
	describeObservability(ch)
	describeLoops(ch)
	describeCluster(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.collectObservability(ch)
	collectCluster(ch, c.src.Cluster)
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	for _, p := range c.src.pools() {
		counter(descPortsExhausted, p.Exhausted(), p.Name)
		for _, b := range p.Backends() {
			st := b.Breaker()
			gauge(descBackendUp, b01(b.Usable()), p.Name, b.Addr)
			gauge(descBreakerOpen, b01(st.Open), p.Name, b.Addr)
			gauge(descBreakerGen, float64(st.Generation), p.Name, b.Addr)
			gauge(descHealthUp, b01(b.HealthUp()), p.Name, b.Addr)
			gauge(descDisabled, b01(st.Disabled), p.Name, b.Addr)
			gauge(descBackendDraining, b01(b.Draining()), p.Name, b.Addr)
			gauge(descBackendWeight, float64(b.Weight()), p.Name, b.Addr)
			for _, k := range pool.DialKinds {
				ok, failed := b.Dials(k)
				counter(descDials, ok, p.Name, b.Addr, k.String(), "success")
				counter(descDials, failed, p.Name, b.Addr, k.String(), "failure")
			}
			counter(descTrips, b.Trips(), p.Name, b.Addr)
			counter(descProbeFailures, b.ProbeFailures(), p.Name, b.Addr)
			counter(descStale, b.StaleResults(), p.Name, b.Addr)
			gauge(descActive, float64(b.Active()), p.Name, b.Addr)
			counter(descBytes, b.Meter.ToBackend.Load(), p.Name, b.Addr, "to_backend")
			counter(descBytes, b.Meter.ToClient.Load(), p.Name, b.Addr, "to_client")
			collectConnectTimes(ch, p.Name, b)
		}
	}
	c.src.Config.collect(gauge, counter)
	if s := c.src.Server; s != nil {
		for _, ls := range s.Stats() {
			counter(descClientConns, ls.OK, ls.Name, "ok")
			counter(descClientConns, ls.Failed, ls.Name, "failed")
			counter(descClientConns, ls.Rejected, ls.Name, "rejected")
			counter(descAcceptErrors, ls.AcceptErrors, ls.Name)
		}
		spliced, copied := s.PathBytes()
		counter(descRelayBytes, spliced, "splice")
		counter(descRelayBytes, copied, "copy")
		gauge(descClientsOpen, float64(s.Active()))
		for _, f := range s.UDPFronts() {
			collectUDP(f, gauge, counter)
		}
		collectLoops(ch, s)
	}
	if c.src.Pipes != nil {
		ps := c.src.Pipes.Stats()
		gauge(descPipes, float64(ps.Busy()), "busy")
		gauge(descPipes, float64(ps.Idle), "idle")
	}
	max := int64(c.src.MaxConnections)
	if c.src.Server != nil {
		max = c.src.Server.MaxConnections() // the cap now: a reload may change it
	}
	gauge(descClientsMax, float64(max))
	if l := c.conns; l != nil {
		gauge(descAdminOpen, float64(l.open.Load()))
		gauge(descAdminMax, float64(l.max))
		counter(descAdminRejected, l.rejected.Load())
	}
}

// collectUDP exports one UDP listener's counters.
func collectUDP(f *loop.UDPFront, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, int64, ...string)) {
	gauge(descUDPActive, float64(f.Sessions.Load()), f.Name)
	for e := range loop.NumSessionEnds {
		counter(descUDPSessions, f.Ended[e].Load(), f.Name, e.String())
	}
	counter(descUDPDatagrams, f.DatagramsToBackend.Load(), f.Name, "to_backend")
	counter(descUDPDatagrams, f.DatagramsToClient.Load(), f.Name, "to_client")
	counter(descUDPBytes, f.BytesToBackend.Load(), f.Name, "to_backend")
	counter(descUDPBytes, f.BytesToClient.Load(), f.Name, "to_client")
	for r := range loop.NumDropReasons {
		counter(descUDPDrops, f.Drops[r].Load(), f.Name, r.String())
	}
	counter(descUDPUnanswered, f.Unanswered.Load(), f.Name)
}

func b01(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
