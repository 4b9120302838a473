package admin

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/l4lb/l4lb/pkg/fleet"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
	"github.com/l4lb/l4lb/pkg/splice"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// Sources are what the metrics are read from.
type Sources struct {
	// Pools are the pools served; Live, when set, gives the current ones
	// instead (a reload replaces them).
	Pools  []*pool.Pool
	Live   func() []*pool.Pool
	Config *ConfigState // nil: no reloads (tests, an embedded handler)
	// Membership adds and removes backends at run time (POST and DELETE
	// on /api/v1/pools/{pool}/backends); nil: those routes answer 501.
	Membership Membership
	Server     *server.Server
	Pipes      *splice.PipePool
	// MaxConnections is the effective global cap.
	MaxConnections int
	// Version is l4lb's version, for l4lb_build_info.
	Version string
	// Cluster is the fleet's shared breaker store; nil with the
	// process's own (no l4lb_cluster_* metrics).
	Cluster *fleet.Store
	// FleetRuntime shares drains and weights with the fleet (shared.go);
	// nil: they are this instance's own.
	FleetRuntime FleetRuntime
	// Collectors are other parts' metrics served on /metrics too (DNS
	// discovery's).
	Collectors []prometheus.Collector
	// Syslog are the logs sent to syslog, for l4lb_syslog_dropped_total.
	Syslog []SyslogOutput
	// Discovery gives a pool's DNS discovery for the pools JSON; nil, or
	// nil for a pool: it has none.
	Discovery func(pool string) *DiscoveryJSON
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	backendLabels = []string{"pool", "backend"}

	descBackendUp     = desc("l4lb_backend_up", "1 when the backend takes new connections: enabled, not drained, health-up and breaker closed.", backendLabels...)
	descBreakerOpen   = desc("l4lb_breaker_open", "1 while the backend's breaker is open.", backendLabels...)
	descBreakerGen    = desc("l4lb_breaker_generation", "Current breaker generation of the backend.", backendLabels...)
	descProbeFailed   = desc("l4lb_breaker_probe_failed", "1 while the backend's breaker is open and a recovery probe this instance made since it opened failed: the breaker alert's signal (a trip alone never sets it).", backendLabels...)
	descBreakerLocal  = desc("l4lb_breaker_local_only", "1 while the backend's breaker is open on this instance alone: it tripped below the fleet's trip_quorum, and the other instances still dial it.", backendLabels...)
	descHealthUp      = desc("l4lb_health_up", "1 while the backend's active health checks pass.", backendLabels...)
	descDisabled      = desc("l4lb_backend_disabled", "1 while the backend is manually disabled.", backendLabels...)
	descDials         = desc("l4lb_backend_dials_total", "Dials to the backend by kind (client, probe, force, health) and result (success, failure).", "pool", "backend", "kind", "result")
	descTrips         = desc("l4lb_breaker_trips_total", "Times this instance tripped the backend's breaker.", backendLabels...)
	descProbeFailures = desc("l4lb_breaker_probe_failures_total", "Failed recovery probes: the breaker alert signal.", backendLabels...)
	descStale         = desc("l4lb_breaker_stale_results_total", "Dial results ignored because the dial began before a breaker transition.", backendLabels...)
	descDropped       = desc("l4lb_breaker_dropped_results_total", "Breaker transitions asked for by dial results that were never made (the backend left the configuration, or the queue to the store was full).", backendLabels...)
	descActive        = desc("l4lb_connections_active", "Connections on the backend now: dials in flight and open relays, with those on a backend at this address that left the pool and still finish.", backendLabels...)
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
	descUDPDrops      = desc("l4lb_udp_drops_total", "UDP datagrams dropped, by reason: no_backend, session_cap, local_error, backend_send, client_send, refused, loop, denied, excess_reply, socket_buffer (the kernel's drops of a full socket receive buffer).", "listener", "reason")
	descUDPUnanswered = desc("l4lb_udp_unanswered_total", "UDP sessions whose first datagram had no reply within the pool's reply_timeout.", "listener")
	descAdminRejected = desc("l4lb_admin_connections_rejected_total", "Admin connections closed at once because max_connections were open.")
)

// collector reads every metric from its sources at scrape time.
type collector struct {
	src   Sources
	conns *limitListener // nil: no connection cap (Handler used alone)
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBackendUp, descBreakerOpen, descBreakerGen, descBreakerLocal, descProbeFailed, descHealthUp, descDisabled,
		descDials, descTrips, descProbeFailures, descStale, descDropped, descActive, descBytes, descClientConns,
		descAcceptErrors, descRelayBytes, descPipes, descClientsOpen, descClientsMax,
		descAdminOpen, descAdminMax, descAdminRejected,
		descUDPActive, descUDPSessions, descUDPDatagrams, descUDPBytes, descUDPDrops, descUDPUnanswered,
		descReloads, descConfigInfo, descLastReload, descSyslogDropped} {
		ch <- d
	}
	describeObservability(ch)
	describeLoops(ch)
	describeCluster(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.collectObservability(ch)
	collectSyslog(ch, c.src.Syslog)
	collectCluster(ch, c.src.Cluster)
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	pools := c.src.pools()
	n := 0
	for _, p := range pools {
		n += len(p.Backends())
	}
	backends := make([]poolBackend, 0, n)
	var leaving map[string]int64 // pool and addr: connections on backends that left
	for _, p := range pools {
		counter(descPortsExhausted, p.Exhausted(), p.Name)
		gauge(descServingBackups, b01(p.Serving() == pool.ServingBackup), p.Name)
		poolPair := labelPair(&labelPool, p.Name)
		for _, b := range p.Backends() {
			backends = append(backends, poolBackend{poolPair, b})
		}
		for _, l := range leavingView(p) {
			if leaving == nil {
				leaving = map[string]int64{}
			}
			leaving[p.Name+" "+l.Addr] = l.ActiveConnections
		}
	}
	// In the order the registry sorts each family in (by backend, then
	// pool), so its sort of thousands of series only finds them sorted.
	slices.SortFunc(backends, func(x, y poolBackend) int {
		if c := strings.Compare(x.b.Addr, y.b.Addr); c != 0 {
			return c
		}
		return strings.Compare(x.pool.GetValue(), y.pool.GetValue())
	})
	for _, e := range backends {
		key := e.pool.GetValue() + " " + e.b.Addr
		collectBackend(ch, e.pool, e.b, leaving[key])
		delete(leaving, key)
	}
	// A backend that left with connections still open, and is not back
	// at its address: its connections, and no other series.
	for key, n := range leaving {
		poolName, addr, _ := strings.Cut(key, " ")
		gauge(descActive, float64(n), poolName, addr)
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

// The per-backend series are most of a scrape (over 20 per backend), so
// they skip prometheus.MustNewConstMetric: each backend's series, label
// pairs and values live in one backendSeries, one allocation per backend
// per scrape, and the label pairs that never change (label names, dial
// kinds, results, directions) are made once. The registry reads every
// field alike, so /metrics says exactly what the const metrics said.

// Label names, pointed to by the label pairs.
var (
	labelPool      = "pool"
	labelBackend   = "backend"
	labelKind      = "kind"
	labelResult    = "result"
	labelDirection = "direction"
)

// labelPair is name="value"; name is one of the label names above.
func labelPair(name *string, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: name, Value: &value}
}

// The constant label pairs of l4lb_backend_dials_total and l4lb_bytes_total.
var (
	dialKindPairs = func() (ps [len(pool.DialKinds)]*dto.LabelPair) {
		for i, k := range pool.DialKinds {
			ps[i] = labelPair(&labelKind, k.String())
		}
		return ps
	}()
	// dialKindsByName indexes pool.DialKinds (and dialKindPairs) in the
	// order of their names, the order the registry sorts them in.
	dialKindsByName = func() (ks [len(pool.DialKinds)]int) {
		for i := range ks {
			ks[i] = i
		}
		slices.SortFunc(ks[:], func(x, y int) int { return strings.Compare(pool.DialKinds[x].String(), pool.DialKinds[y].String()) })
		return ks
	}()
	// dialResultPairs: failure, success (sorted).
	dialResultPairs = [2]*dto.LabelPair{labelPair(&labelResult, "failure"), labelPair(&labelResult, "success")}
	// directionPairs: to_backend, to_client.
	directionPairs = [2]*dto.LabelPair{labelPair(&labelDirection, "to_backend"), labelPair(&labelDirection, "to_client")}
)

// gaugeSeries and counterSeries are one sample of a gauge or counter: a
// prometheus.Metric whose dto value lives in it. labels are sorted by
// name, as the registry wants them, and shared: never changed once sent.
type gaugeSeries struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	v      float64
	g      dto.Gauge
}

func (s *gaugeSeries) Desc() *prometheus.Desc { return s.desc }

func (s *gaugeSeries) Write(out *dto.Metric) error {
	out.Label = s.labels
	out.Gauge = &s.g
	return nil
}

// send sets s and sends it on ch.
func (s *gaugeSeries) send(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels []*dto.LabelPair) {
	s.desc, s.labels, s.v = d, labels, v
	s.g.Value = &s.v
	ch <- s
}

type counterSeries struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	v      float64
	c      dto.Counter
}

func (s *counterSeries) Desc() *prometheus.Desc { return s.desc }

func (s *counterSeries) Write(out *dto.Metric) error {
	out.Label = s.labels
	out.Counter = &s.c
	return nil
}

func (s *counterSeries) send(ch chan<- prometheus.Metric, d *prometheus.Desc, v int64, labels []*dto.LabelPair) {
	s.desc, s.labels, s.v = d, labels, float64(v)
	s.c.Value = &s.v
	ch <- s
}

// backendSeries holds one backend's series of one scrape.
type backendSeries struct {
	addr    string
	backend dto.LabelPair // backend="addr"
	// labels are {backend, pool}; dialLabels[kind][result] {backend, kind,
	// pool, result} (kinds and results by name); byteLabels[direction]
	// {backend, direction, pool}.
	labels     [2]*dto.LabelPair
	dialLabels [len(pool.DialKinds)][2][4]*dto.LabelPair
	byteLabels [2][3]*dto.LabelPair
	gauges     [11]gaugeSeries
	counters   [len(pool.DialKinds)*2 + 6]counterSeries
	connect    histogramSeries
}

// poolBackend is a backend and its pool's label pair.
type poolBackend struct {
	pool *dto.LabelPair
	b    *pool.Backend
}

// collectBackend exports backend b's series; poolPair is its pool="name".
// leaving adds the connections on earlier backends at its address that
// left the pool (pool.Leaving) to l4lb_connections_active.
func collectBackend(ch chan<- prometheus.Metric, poolPair *dto.LabelPair, b *pool.Backend, leaving int64) {
	s := new(backendSeries)
	s.addr = b.Addr
	s.backend.Name, s.backend.Value = &labelBackend, &s.addr
	s.labels = [2]*dto.LabelPair{&s.backend, poolPair}
	l := s.labels[:]
	st := b.Breaker()
	g, c := s.gauges[:], s.counters[:]
	g[0].send(ch, descBackendUp, b01(b.InRotation()), l)
	g[1].send(ch, descBreakerOpen, b01(st.Open), l)
	g[2].send(ch, descBreakerGen, float64(st.Generation), l)
	g[3].send(ch, descHealthUp, b01(b.HealthUp()), l)
	g[4].send(ch, descDisabled, b01(st.Disabled), l)
	g[5].send(ch, descBackendDraining, b01(b.Draining()), l)
	g[6].send(ch, descBackendWeight, float64(b.Weight()), l)
	g[8].send(ch, descBackendBackup, b01(b.Backup()), l)
	g[9].send(ch, descBreakerLocal, b01(st.LocalOnly), l)
	g[10].send(ch, descProbeFailed, b01(st.Open && b.ProbeFailedSinceOpen()), l)
	for i, k := range dialKindsByName {
		ok, failed := b.Dials(pool.DialKinds[k])
		for r, v := range [2]int64{failed, ok} {
			s.dialLabels[i][r] = [4]*dto.LabelPair{&s.backend, dialKindPairs[k], poolPair, dialResultPairs[r]}
			c[2*i+r].send(ch, descDials, v, s.dialLabels[i][r][:])
		}
	}
	n := 2 * len(pool.DialKinds)
	c[n].send(ch, descTrips, b.Trips(), l)
	c[n+1].send(ch, descProbeFailures, b.ProbeFailures(), l)
	c[n+2].send(ch, descStale, b.StaleResults(), l)
	g[7].send(ch, descActive, float64(b.Active()+leaving), l)
	for d, v := range [2]int64{b.Meter.ToBackend.Load(), b.Meter.ToClient.Load()} {
		s.byteLabels[d] = [3]*dto.LabelPair{&s.backend, directionPairs[d], poolPair}
		c[n+3+d].send(ch, descBytes, v, s.byteLabels[d][:])
	}
	c[n+5].send(ch, descDropped, b.DroppedResults(), l)
	s.connect.send(ch, b.ConnectTimes(), &s.labels)
}

// collectUDP exports one UDP listener's counters.
func collectUDP(f *udpsession.Front, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, int64, ...string)) {
	gauge(descUDPActive, float64(f.Sessions.Load()), f.Name)
	for e := range udpsession.NumSessionEnds {
		counter(descUDPSessions, f.Ended[e].Load(), f.Name, e.String())
	}
	counter(descUDPDatagrams, f.DatagramsToBackend.Load(), f.Name, "to_backend")
	counter(descUDPDatagrams, f.DatagramsToClient.Load(), f.Name, "to_client")
	counter(descUDPBytes, f.BytesToBackend.Load(), f.Name, "to_backend")
	counter(descUDPBytes, f.BytesToClient.Load(), f.Name, "to_client")
	for r := range udpsession.NumDropReasons {
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
