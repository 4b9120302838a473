package discovery

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the discovery series of every pool, read at scrape time
// from counters the watchers keep (the shape of pkg/admin's collector).
// One Metrics serves every watcher of a process; a pool's series stay
// across reloads until Forget.
type Metrics struct {
	mu    sync.Mutex
	pools map[string]*poolSeries
}

// poolSeries is one pool's series; a nil *poolSeries counts nothing.
type poolSeries struct {
	lookups     [numResults]atomic.Int64
	backends    atomic.Int64
	lastSuccess atomic.Int64 // Unix nanoseconds of the last answer; 0: never
}

var (
	descLookups = prometheus.NewDesc("l4lb_discovery_lookups_total",
		"DNS discovery lookups by result: ok (records), empty (the name has no records of the wanted types), nxdomain (the name does not exist), error (unreachable, SERVFAIL, REFUSED, malformed), timeout (no resolver answered in time).",
		[]string{"pool", "result"}, nil)
	descBackends = prometheus.NewDesc("l4lb_discovery_backends",
		"Backends in the set DNS discovery reported last.", []string{"pool"}, nil)
	descLastSuccess = prometheus.NewDesc("l4lb_discovery_last_success_timestamp_seconds",
		"When a DNS discovery lookup last got an answer, with records or without (Unix seconds; 0: never).", []string{"pool"}, nil)
)

// NewMetrics makes the discovery metrics and registers them with reg
// (nil: not registered, for a caller that registers them itself).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{pools: map[string]*poolSeries{}}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// pool is the series of the pool named name, made on first use.
func (m *Metrics) pool(name string) *poolSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.pools[name]
	if s == nil {
		s = &poolSeries{}
		m.pools[name] = s
	}
	return s
}

// Forget drops a pool's series: for a pool that left the configuration
// or no longer discovers, once its watcher's Run has returned (a watcher
// still running would count into series no scrape reads).
func (m *Metrics) Forget(pool string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pools, pool)
}

// Describe is prometheus.Collector's.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLookups
	ch <- descBackends
	ch <- descLastSuccess
}

// Collect is prometheus.Collector's.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, s := range m.pools {
		for r := range numResults {
			ch <- prometheus.MustNewConstMetric(descLookups, prometheus.CounterValue, float64(s.lookups[r].Load()), name, r.String())
		}
		ch <- prometheus.MustNewConstMetric(descBackends, prometheus.GaugeValue, float64(s.backends.Load()), name)
		last := 0.0
		if ns := s.lastSuccess.Load(); ns != 0 {
			last = float64(ns) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(descLastSuccess, prometheus.GaugeValue, last, name)
	}
}

// count counts a lookup that ended at now.
func (s *poolSeries) count(r result, now time.Time) {
	if s == nil {
		return
	}
	s.lookups[r].Add(1)
	if r.answered() {
		s.lastSuccess.Store(now.UnixNano())
	}
}

func (s *poolSeries) setBackends(n int) {
	if s != nil {
		s.backends.Store(int64(n))
	}
}
