package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The longlived scenario's tables: which figures, what direct's row
// subtracts, and how a run's section goes into docs/performance-longlived.md.

func llMetrics() []MetricDef {
	return []MetricDef{
		{Name: "conns", Unit: "conns", Better: HigherBetter, NoRatio: true},
		{Name: "establish_s", Unit: "s", Better: LowerBetter},
		{Name: "rss_kb_per_conn", Unit: "KB", Better: LowerBetter},
		{Name: "kernel_kb_per_conn", Unit: "KB", Better: LowerBetter},
		{Name: "slab_kb_per_conn", Unit: "KB", Better: LowerBetter},
		{Name: "sockmem_kb_per_conn", Unit: "KB", Better: LowerBetter},
		{Name: "rss_mb", Unit: "MB", Better: LowerBetter},
		{Name: "p50_us", Unit: "µs", Better: LowerBetter},
		{Name: "p99_us", Unit: "µs", Better: LowerBetter},
		{Name: "msgs", Better: HigherBetter, NoRatio: true},
		{Name: "lost", Better: LowerBetter, NoRatio: true},
		{Name: "loadgen_busy_pct", Unit: "%", Better: LowerBetter, NoRatio: true},
		{Name: "others_on_proxy_cpu_pct", Unit: "%", Better: LowerBetter, NoRatio: true},
		{Name: "idle_cpu_ms_per_s", Unit: "ms/s", Better: LowerBetter},
		{Name: "interim_per_s", Unit: "lines/s", Better: HigherBetter, NoRatio: true},
		{Name: "cpu_us_per_msg", Unit: "µs", Better: LowerBetter},
		{Name: "upgrade_s", Unit: "s", Better: LowerBetter},
		{Name: "upgrade_broken", Better: LowerBetter, NoRatio: true},
		{Name: "handed_over", Better: HigherBetter, NoRatio: true},
		{Name: "handover_s", Unit: "s", Better: LowerBetter, NoRatio: true},
	}
}

func stormMetrics() []MetricDef {
	return []MetricDef{
		{Name: "recover_s", Unit: "s", Better: LowerBetter},
		{Name: "served", Better: HigherBetter, NoRatio: true},
		{Name: "failed", Better: LowerBetter, NoRatio: true},
		{Name: "not_dropped", Better: LowerBetter, NoRatio: true},
		{Name: "attempts_per_conn", Better: LowerBetter},
		{Name: "proxy_cpu_s", Unit: "s", Better: LowerBetter},
		{Name: "proxy_listen_overflows", Better: LowerBetter, NoRatio: true},
		{Name: "proxy_listen_drops", Better: LowerBetter, NoRatio: true},
		{Name: "proxy_syn_retrans", Better: LowerBetter, NoRatio: true},
		{Name: "backend_listen_overflows", Better: LowerBetter, NoRatio: true},
		{Name: "backend_listen_drops", Better: LowerBetter, NoRatio: true},
		{Name: "client_syn_retrans", Better: LowerBetter, NoRatio: true},
		{Name: "backend_restart_ms", Unit: "ms", Better: LowerBetter, NoRatio: true},
	}
}

func newLLResult(name string, n int) *ScenarioResult {
	return &ScenarioResult{Scenario: fmt.Sprintf("%s, N = %d", name, n), Metrics: llMetrics()}
}

func newStormResult(n int) *ScenarioResult {
	return &ScenarioResult{Scenario: fmt.Sprintf("storm, N = %d", n), Metrics: stormMetrics()}
}

// finishLL derives kernel_kb_per_conn: the slab per connection over
// the proxy's own, i.e. minus direct's (the clients' and backends'
// sockets). Socket buffers (sockmem) stay apart: idle connections hold
// none, and the system-wide page count moves with the rest of the
// machine by more than that.
func finishLL(sr *ScenarioResult) {
	sr.subtractDirect("slab_kb_per_conn", "kernel_kb_per_conn")
	sr.Notes = append(sr.Notes,
		"rss_kb_per_conn: the rise of VmRSS over every instance's process tree from before the clients connect to 2 s after all are held, / conns; rss_mb: the trees' RSS then",
		"slab_kb_per_conn: the rise of slab objects in use (/proc/slabinfo), system-wide, / conns; kernel_kb_per_conn = that minus direct's (the clients' and backends' sockets), i.e. the proxy's two sockets, files and epoll items; sockmem_kb_per_conn: the rise of TCP socket buffer pages (/proc/net/sockstat mem), system-wide, / conns (idle connections hold none: what it shows is the rest of the machine)",
		"p50_us/p99_us: every 64-byte message's round trip (client send to the last byte of its echo) over the window, all N held; cpu_us_per_msg: the proxy's CPU over that window / messages; idle_cpu_ms_per_s: its CPU over a window with no message at all (/proc ticks are 10 ms: over 5 s, one tick is 2 ms/s); interim_per_s: the access log's interim lines written over that window (l4lb-log, l4lb-interim); loadgen_busy_pct: how busy the clients' and backends' CPU was over the message window, others_on_proxy_cpu_pct: the proxy CPU's busy share then minus the proxy's own (other work on a shared machine, which shows in p99)",
		"upgrade_s: from the signal (l4lb SIGUSR2, HAProxy master SIGUSR2, nginx SIGHUP) to the exit of the last old process or worker; \"> X\": still alive when the wait ended; upgrade_broken: connections that did not echo one message sent after it; handed_over, handover_s: l4lb's own account, summed over its instances' logs (relays= of \"upgrade: handed over established connections\") and the longest took=")
}

// finishStorm notes what the storm's figures are.
func finishStorm(sr *ScenarioResult) {
	sr.Notes = append(sr.Notes,
		"every backend process is SIGKILLed at once with N held and started again at once; recover_s: from the kill to the last client connection served again (reconnected, one message echoed); a client reconnects at once when its connection closes, then backs off from 100 ms doubling to 2 s with jitter, at most 15 tries, within 90 s: failed gave up, not_dropped never saw its connection close",
		"nstat -az deltas inside each namespace: proxy_* where the proxies listen and dial (TcpExtListenOverflows, TcpExtListenDrops, TcpExtTCPSynRetrans of their dials to the backends), backend_* where the backends listen, client_syn_retrans the clients' SYN retransmits (each a SYN that went unanswered); proxy_cpu_s: the proxies' CPU from arming the storm to its end")
}

// markLowerBound marks a figure of system as "more than" (the event had
// not happened when the wait ended).
func (sr *ScenarioResult) markLowerBound(system, metric string) {
	r := sr.row(system, KindPeer)
	if r.LowerBound == nil {
		r.LowerBound = map[string]bool{}
	}
	r.LowerBound[metric] = true
}

// llProseBlocks are report.md.tmpl's blocks of the longlived section:
// its introduction, then one after each table.
var llProseBlocks = []string{"longlived-intro", "longlived", "storm"}

// llSection is one N's part of the report.
type llSection struct {
	plan      llPlan
	meta      []string
	about     []string
	skipped   []string
	ll, storm *ScenarioResult
}

func llSectionKey(n int) string { return fmt.Sprintf("longlived N=%d", n) }

// renderLLSection is the Markdown of one N, between markers that
// appendLLSection finds again.
func renderLLSection(sec llSection) string {
	var b strings.Builder
	key := llSectionKey(sec.plan.n)
	fmt.Fprintf(&b, "\n<!-- begin %s -->\n\n## Long-lived connections and a reconnect storm, N = %d\n", key, sec.plan.n)
	writeProse(&b, llProseBlocks[0])
	b.WriteString("\n")
	for _, m := range append(append(sec.meta, sec.about...), sec.skipped...) {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	writeScenarioMD(&b, sec.ll)
	writeProse(&b, llProseBlocks[1])
	writeScenarioMD(&b, sec.storm)
	writeProse(&b, llProseBlocks[2])
	fmt.Fprintf(&b, "\n<!-- end %s -->\n", key)
	return b.String()
}

// spliceLLSection puts section (as renderLLSection wrote it) into doc: in
// place of the same N's earlier section, else at the end.
func spliceLLSection(doc, key, section string) string { return spliceSection(doc, key, section, "") }

func appendLLSection(path string, sec llSection) error {
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	out := spliceLLSection(string(doc), llSectionKey(sec.plan.n), renderLLSection(sec))
	return os.WriteFile(path, []byte(out), 0o644)
}

// parse fills conns and systems from their flags.
func (lo *llOptions) parse(conns, systems string) error {
	for _, f := range strings.Split(conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1_000_000 {
			return fmt.Errorf("-longlived-conns: %q: want 1..1000000", f)
		}
		lo.conns = append(lo.conns, n)
	}
	var known []string
	for _, s := range llSystemCatalog() {
		known = append(known, s.name)
	}
	var err error
	lo.systems, err = pickNames(systems, known, "longlived system")
	return err
}
