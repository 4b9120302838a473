package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The udp scenario's load, the same in both profiles (only the run time
// follows -quick).
const (
	udpDatagram = 64 // bytes, both modes
	// Request/response: many sessions (one per client port), a bounded
	// number of requests in flight.
	udpRRSockets = 512
	udpRRWindow  = 64
	udpRRTimeout = 200 * time.Millisecond
	// One-way: a few clients, at most udpOWWindow datagrams not yet
	// counted by the sink (below what a default 208 KiB receive queue
	// holds of 64-byte datagrams, so the proxy is kept busy, not flooded).
	udpOWClients = 4 // sessions of their own
	udpOWWindow  = 128
	udpOWBatch   = 16
	udpOWStall   = 200 * time.Millisecond
	udpOWSettle  = time.Second
	// udpSessionTimeout is nginx's proxy_timeout and l4lb's session_timeout.
	udpSessionTimeout = "10s"
	// udpRRMaxSessions and udpOWMaxSessions are l4lb's max_sessions: room
	// for twice the sessions each mode opens, and no more, because each
	// session holds an fd that l4lb reserves out of RLIMIT_NOFILE (at 4096
	// each, the reservation cut the TCP connection cap under the idle
	// scenario's 9000).
	udpRRMaxSessions = 2 * udpRRSockets
	udpOWMaxSessions = 16 * udpOWClients
	// udpTarget is issue 11's bar: l4lb's datagrams/s per core at least
	// this many times nginx's.
	udpTarget = 1.5
	// udpPeer is the system the target is measured against.
	udpPeer = "nginx"
)

// udpScenario: UDP through every system that proxies it, in two modes.
// rr: 512 client sockets (sessions) send a 64-byte request and wait for
// its echo, 64 in flight; ow: 4 clients stream 64-byte datagrams to a
// counting sink, at most 128 unaccounted for. Per datagram relayed (a
// request, a reply, or a one-way datagram: one read and one write by the
// proxy) the proxy's CPU; the per-core ratio to nginx is nginx's CPU per
// datagram over the system's (datagrams per CPU-second, the system's over
// nginx's). nginx also runs one-way with proxy_responses 0 (ow_r0).
type udpScenario struct{}

func (udpScenario) name() string { return "udp" }
func (udpScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "rr_dgram_per_s", Unit: "dgram/s", Better: HigherBetter, Chart: true},
		{Name: "rr_p50_us", Unit: "µs", Better: LowerBetter},
		{Name: "rr_p99_us", Unit: "µs", Better: LowerBetter},
		{Name: "rr_cpu_us_per_dgram", Unit: "µs", Better: LowerBetter, Chart: true},
		{Name: "rr_lost", Unit: "dgrams", Better: LowerBetter, NoRatio: true},
		{Name: "ow_dgram_per_s", Unit: "dgram/s", Better: HigherBetter, Chart: true},
		{Name: "ow_cpu_us_per_dgram", Unit: "µs", Better: LowerBetter, Chart: true},
		{Name: "ow_loss_pct", Unit: "%", Better: LowerBetter, NoRatio: true},
		{Name: "ow_r0_dgram_per_s", Unit: "dgram/s", Better: HigherBetter, NoRatio: true},
		{Name: "ow_r0_cpu_us_per_dgram", Unit: "µs", Better: LowerBetter, NoRatio: true},
		{Name: "rr_core_vs_nginx", Unit: "×", Better: HigherBetter, NoRatio: true},
		{Name: "ow_core_vs_nginx", Unit: "×", Better: HigherBetter, NoRatio: true},
	}
}
func (udpScenario) rounds(o options) int   { return o.rounds }
func (udpScenario) applies(s *system) bool { return s.hasUDP() }

// notApplicable: a system without UDP gets a row saying why.
func (udpScenario) notApplicable(s *system) string {
	if s.hasUDP() {
		return ""
	}
	return s.noUDPReason()
}

func (udpScenario) run(h *harness, s *system) (map[string]float64, error) {
	out := map[string]float64{}
	var rr udpRRResult
	drops := newDropWatch(s.addr(routeUDPRR), loopAddr(udpEchoPort(h.opts.portBase)))
	cpu, err := measureCPU(s, func() error {
		var err error
		rr, err = udpRequestReply(udpRRConfig{addr: s.addr(routeUDPRR), sockets: udpRRSockets, window: udpRRWindow,
			size: udpDatagram, d: h.opts.runTime, timeout: udpRRTimeout})
		return err
	})
	if err != nil {
		return out, fmt.Errorf("request/response: %w", err)
	}
	slices.Sort(rr.latUS)
	out["rr_dgram_per_s"] = 2 * float64(rr.inWindow) / rr.elapsed.Seconds()
	out["rr_p50_us"] = percentile(rr.latUS, 50)
	out["rr_p99_us"] = percentile(rr.latUS, 99)
	out["rr_lost"] = float64(rr.lost)
	if isProxy(s) {
		addCPUPerDatagram(out, "rr_cpu_us_per_dgram", cpu, 2*float64(rr.replies))
	}
	h.logf("    udp %-8s rr: %d sent, %d replies (%d in %v), %d lost, %d stale, %d errors; %s",
		s.spec.name, rr.sent, rr.replies, rr.inWindow, rr.elapsed.Round(time.Millisecond), rr.lost, rr.stale, rr.errors, drops.delta())

	modes := []struct{ prefix, route string }{{"ow", routeUDPOneWay}, {"ow_r0", routeUDPNoReply}}
	for _, m := range modes {
		if !s.hasRoute(m.route) {
			continue // udp_noreply: nginx only
		}
		time.Sleep(h.opts.pause)
		var ow udpOneWayResult
		drops := newDropWatch(s.addr(m.route), loopAddr(udpSinkPort(h.opts.portBase)))
		cpu, err := measureCPU(s, func() error {
			var err error
			ow, err = udpOneWay(udpOneWayConfig{addr: s.addr(m.route), clients: udpOWClients, window: udpOWWindow,
				batch: udpOWBatch, size: udpDatagram, d: h.opts.runTime, stall: udpOWStall, settle: udpOWSettle}, h.udpCount.load)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("one-way (%s): %w", m.route, err)
		}
		out[m.prefix+"_dgram_per_s"] = float64(ow.inWindow) / ow.elapsed.Seconds()
		if m.prefix == "ow" {
			out["ow_loss_pct"] = ow.lossPct()
		}
		if isProxy(s) {
			addCPUPerDatagram(out, m.prefix+"_cpu_us_per_dgram", cpu, float64(ow.delivered))
		}
		h.logf("    udp %-8s %s: %d sent, %d delivered (%d in %v), %d lost, %d errors; %s",
			s.spec.name, m.prefix, ow.sent, ow.delivered, ow.inWindow, ow.elapsed.Round(time.Millisecond), ow.lost, ow.errors, drops.delta())
	}
	return out, nil
}

// dropWatch counts the kernel's receive-queue drops in front of the first
// socket a datagram meets (the proxy's listener; the backend for direct)
// and of the backend, over one run, so the log says where loss happened.
type dropWatch struct {
	front, back   int
	front0, back0 uint64
}

func newDropWatch(front, back string) *dropWatch {
	w := &dropWatch{front: addrPort(front), back: addrPort(back)}
	w.front0, w.back0 = udpDrops(w.front), udpDrops(w.back)
	return w
}

func (w *dropWatch) delta() string {
	if w.front == w.back {
		return fmt.Sprintf("kernel queue drops at the backend %d", udpDrops(w.back)-w.back0)
	}
	return fmt.Sprintf("kernel queue drops at the proxy's listener %d, at the backend %d",
		udpDrops(w.front)-w.front0, udpDrops(w.back)-w.back0)
}

// addrPort is the port of a checked loopback address (0 if malformed).
func addrPort(addr string) int {
	sa, err := udpSockaddr(addr)
	if err != nil {
		return 0
	}
	return sa.Port
}

// addCPUPerDatagram sets key to the proxy's CPU µs per datagram relayed;
// a run too short for the CPU clock (100 Hz) to tick gives nothing.
func addCPUPerDatagram(out map[string]float64, key string, cpu, dgrams float64) {
	if dgrams > 0 && cpu > 0 {
		out[key] = cpu * 1e6 / dgrams
	}
}

// finish pairs every round with nginx's same round: PREFIX_core_vs_nginx
// is the system's datagrams per CPU-second over nginx's, and a note says
// whether l4lb meets the target (the median of its paired rounds).
func (udpScenario) finish(sr *ScenarioResult) {
	sr.Notes = append(sr.Notes, udpAbout())
	var peer *SystemRow
	for _, r := range sr.Rows {
		if r.System == udpPeer && r.NA == "" {
			peer = r
		}
	}
	for _, r := range sr.Rows {
		if r.NA != "" || peer == nil {
			continue
		}
		// Datagrams per CPU-second are 1e6 / CPU µs per datagram, so the
		// system's over nginx's is nginx's CPU per datagram over its own.
		for _, mode := range []string{"rr", "ow"} {
			r.Samples[mode+"_core_vs_nginx"] = pairedRatio(peer.Samples[mode+"_cpu_us_per_dgram"], r.Samples[mode+"_cpu_us_per_dgram"])
		}
	}
	for _, r := range sr.Rows {
		if r.Kind != KindSubject {
			continue
		}
		switch {
		case r.NA != "":
			sr.Notes = append(sr.Notes, fmt.Sprintf("target (issue 11): not measured, %s is n/a", r.System))
		case peer == nil:
			sr.Notes = append(sr.Notes, fmt.Sprintf("target (issue 11): not measured, %s did not run", udpPeer))
		default:
			r0 := pairedRatio(peer.Samples["ow_r0_cpu_us_per_dgram"], r.Samples["ow_cpu_us_per_dgram"])
			sr.Notes = append(sr.Notes, udpTargetNote(r.System, summarize(r.Samples["rr_core_vs_nginx"]),
				summarize(r.Samples["ow_core_vs_nginx"]), summarize(r0)))
		}
	}
}

// pairedRatio divides xs by ys round by round (ys's rounds); a round
// either side lacks is NaN.
func pairedRatio(xs, ys []float64) []float64 {
	out := make([]float64, len(ys))
	for i, y := range ys {
		out[i] = math.NaN()
		if i < len(xs) {
			out[i] = ratio(xs[i], y)
		}
	}
	return out
}

// udpTargetNote says, per mode, the median of the paired per-core ratios
// [min–max] and whether it reaches the target; r0 is one-way against
// nginx's proxy_responses 0, for information.
func udpTargetNote(system string, rr, ow, r0 Summary) string {
	verdict := func(s Summary) string {
		if s.Rounds == 0 {
			return "not measured"
		}
		v := "met"
		if s.Median < udpTarget {
			v = "not met"
		}
		return fmt.Sprintf("%s× [%s–%s] (%s)", formatRatio(s.Median), formatRatio(s.Min), formatRatio(s.Max), v)
	}
	note := fmt.Sprintf("target (issue 11): %s >= %.1f× %s's datagrams/s per core (datagrams per CPU-second of the proxy, paired round by round): request/response %s, one-way %s",
		system, udpTarget, udpPeer, verdict(rr), verdict(ow))
	if r0.Rounds > 0 {
		note += fmt.Sprintf("; one-way against %s with proxy_responses 0: %s× [%s–%s]", udpPeer, formatRatio(r0.Median), formatRatio(r0.Min), formatRatio(r0.Max))
	}
	return note
}

func udpAbout() string {
	return fmt.Sprintf("rr: %d client sockets (one session each) send a %d-byte request and wait for its echo, %d in flight; a request unanswered after %v is lost (rr_lost). "+
		"nginx proxy_responses 1 and l4lb responses = 1 end a session at its reply, as for DNS (nginx opens a new upstream socket per request; l4lb, with reuse_sockets = true, reuses the socket of a session that ended cleanly). "+
		"ow: %d clients stream %d-byte datagrams (bursts of %d) to a counting sink, at most %d not yet counted, so the sender goes as fast as the proxy relays "+
		"(l4lb sends a burst of equal datagrams to the backend as one UDP GSO send); "+
		"nginx without proxy_responses and l4lb keep a session per client until proxy_timeout/session_timeout (%s). "+
		"ow_r0: nginx with proxy_responses 0 (\"no response expected\"), which ends a session once the client's queued datagrams are sent, so a stream takes a new upstream socket per burst. "+
		"CPU per datagram relayed (a request, a reply or a one-way datagram: one read and one write) over the proxy's process tree; "+
		"X_core_vs_nginx = datagrams per CPU-second over nginx's in the same round (nginx's CPU per datagram over the system's)",
		udpRRSockets, udpDatagram, udpRRWindow, udpRRTimeout, udpOWClients, udpDatagram, udpOWBatch, udpOWWindow, udpSessionTimeout)
}
