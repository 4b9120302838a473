package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// sniScenario: TLS clients through each proxy's SNI routing. Per
// connection a worker dials, completes a full TLS handshake with Go's
// default client config (X25519MLKEM768 key share: a ClientHello of about
// 1.5 KB) naming one of two routes in turn, sends 64 bytes, reads the
// echo and closes. The proxy reads the ClientHello without terminating
// TLS and picks the pool; the reply's tag proves which pool answered.
// Figures: the proxy's CPU per connection (and its sleeps, as in the
// conn scenario), and what it adds to the p50
// and p99 of connect+handshake+echo over direct's same round (direct
// dials each name's backend itself).
type sniScenario struct{}

const (
	routeSNI = "sni" // the TLS listener; its own pool is the fallback
	// sniWorkers is one: both TLS ends run on the load generator's core,
	// which a handshake keeps busy for most of a millisecond; with more
	// workers they queue there, and the p50 is that queue, not the
	// proxy's part of the latency.
	sniWorkers      = 1
	sniBackendCount = 3 // the two routed pools and the fallback
	// sniInspectTimeout is every proxy's wait for the whole ClientHello
	// (l4lb inspect_timeout, HAProxy inspect-delay, nginx preread_timeout).
	sniInspectTimeout = "5s"
)

// sniPool is one route of the sni listener: clients naming host go to
// pool, whose one backend is the TLS echo at backend.
type sniPool struct {
	pool, host, backend string
}

// sniPools are the two routes (backends filled by placeSNI); the
// fallback pool is the listener's own, named as the route.
var sniPools = []sniPool{
	{pool: "sni_api", host: "api.bench.test"},
	{pool: "sni_web", host: "web.bench.test"},
}

// sniBackendPort: the TLS echos after the UDP ones (P+5, P+6, and the
// fallback P+7).
func sniBackendPort(base, k int) int { return base + 5 + k }

// sniTag is the first reply byte of the k-th TLS echo.
func sniTag(k int) byte { return byte(k + 1) }

// placeSNI gives s its sni listener (the 8th of its ports) with the two
// routes and the fallback.
func placeSNI(s *system, base int) {
	r := route{name: routeSNI, listen: loopAddr(listenPort(base, s.index, 7)),
		backends: []string{loopAddr(sniBackendPort(base, len(sniPools)))}}
	for k, p := range sniPools {
		p.backend = loopAddr(sniBackendPort(base, k))
		r.sni = append(r.sni, p)
	}
	s.routes = append(s.routes, r)
}

func (sniScenario) name() string { return "sni" }
func (sniScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "conn_per_s", Unit: "conn/s", Better: HigherBetter},
		{Name: "p50_us", Unit: "µs", Better: LowerBetter},
		{Name: "p99_us", Unit: "µs", Better: LowerBetter},
		{Name: "added_p50_us", Unit: "µs", Better: LowerBetter, Chart: true, NoRatio: true},
		{Name: "added_p99_us", Unit: "µs", Better: LowerBetter, NoRatio: true},
		{Name: "cpu_us_per_conn", Unit: "µs", Better: LowerBetter, Chart: true},
		{Name: "sleeps_per_conn", Unit: "sleeps", Better: LowerBetter, NoRatio: true},
		{Name: "misrouted", Unit: "", Better: LowerBetter, NoRatio: true},
		{Name: "errors", Unit: "", Better: LowerBetter, NoRatio: true},
	}
}
func (sniScenario) rounds(o options) int           { return o.rounds }
func (sniScenario) applies(s *system) bool         { return s.hasRoute(routeSNI) }
func (sniScenario) notApplicable(s *system) string { return s.spec.noSNI }
func (sniScenario) finish(sr *ScenarioResult) {
	sr.addedOverDirect("p50_us", "added_p50_us")
	sr.addedOverDirect("p99_us", "added_p99_us")
	for _, r := range sr.Rows {
		if r.Kind == KindSubject && r.NA == "" {
			sr.Notes = append(sr.Notes, sniTargetNote(sr, r))
		}
	}
}

// sniTargetNote says whether r is at most the best peer on CPU per
// connection and on added p50 (issue 29's target), by medians, and gives
// r's CPU over each peer's paired round by round, which takes out what
// the host did between rounds.
func sniTargetNote(sr *ScenarioResult, r *SystemRow) string {
	verdict := func(metric string) string {
		peer, best := sr.bestPeer(metric)
		own := summarize(r.Samples[metric]).Median
		if peer == "" || math.IsNaN(own) {
			return metric + " not measured"
		}
		v := "met"
		if own > best {
			v = "not met"
		}
		return fmt.Sprintf("%s %s vs %s's %s (%s)", metric, formatNum(own), peer, formatNum(best), v)
	}
	note := fmt.Sprintf("target (issue 29): %s <= the best peer: %s; %s", r.System, verdict("cpu_us_per_conn"), verdict("added_p50_us"))
	for _, p := range sr.Rows {
		if p.Kind != KindPeer || p.NA != "" {
			continue
		}
		s := summarize(pairedRatio(r.Samples["cpu_us_per_conn"], p.Samples["cpu_us_per_conn"]))
		if s.Rounds > 0 {
			note += fmt.Sprintf("; cpu_us_per_conn over %s's, paired by round: %s× [%s–%s]", p.System, formatRatio(s.Median), formatRatio(s.Min), formatRatio(s.Max))
		}
	}
	return note
}

func (sniScenario) run(h *harness, s *system) (map[string]float64, error) {
	r := s.route(routeSNI)
	var misrouted atomic.Int64
	var next atomic.Uint64
	once := func(req, rep []byte) error {
		k := int(next.Add(1) % uint64(len(r.sni)))
		addr := r.listen
		if !isProxy(s) {
			addr = r.sni[k].backend
		}
		err := sniOnce(addr, r.sni[k].host, h.sniCert.roots, req, rep)
		if err == nil && rep[0] != sniTag(k) {
			misrouted.Add(1)
			return errMisrouted
		}
		return err
	}
	var res connResult
	sleptBefore := voluntarySwitches(s.pids())
	cpu, _ := measureCPU(s, func() error {
		res = connLoadWith(once, sniWorkers, h.opts.runTime, 0, nil, nil)
		return nil
	})
	if res.ok == 0 {
		return nil, fmt.Errorf("no connection succeeded (%d errors, %d misrouted)", res.errors, misrouted.Load())
	}
	slices.Sort(res.latUS)
	out := map[string]float64{
		"conn_per_s": float64(res.ok) / res.elapsed.Seconds(),
		"p50_us":     percentile(res.latUS, 50),
		"p99_us":     percentile(res.latUS, 99),
		"misrouted":  float64(misrouted.Load()),
		"errors":     float64(res.errors) - float64(misrouted.Load()),
	}
	if isProxy(s) {
		out["cpu_us_per_conn"] = cpu * 1e6 / float64(res.ok)
		out["sleeps_per_conn"] = float64(voluntarySwitches(s.pids())-sleptBefore) / float64(res.ok)
	}
	return out, nil
}

// errMisrouted: the reply came from another pool than the name's.
var errMisrouted = errors.New("answered by the wrong pool")

// sniOnce is one connection: dial, a full handshake naming host (no
// session cache, so never resumed), req out, its echo into rep.
func sniOnce(addr, host string, roots *x509.CertPool, req, rep []byte) error {
	c, err := dialLoopback(addr)
	if err != nil {
		return err
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: roots})
	defer tc.Close()
	if _, err := tc.Write(req); err != nil {
		return err
	}
	_, err = io.ReadFull(tc, rep)
	return err
}
