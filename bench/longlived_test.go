package main

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/server"
)

func TestHistBucketsBoundTheirValues(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 63, 64, 65, 100, 127, 128, 1000, 4095, 4096, 123456, 10_000_000} {
		i := histBucket(v)
		if i < prev {
			t.Fatalf("bucket of %d (%d) below the previous value's (%d)", v, i, prev)
		}
		prev = i
		if lo, hi := histLow(i), histHigh(i); float64(v) < lo || float64(v) >= hi {
			t.Errorf("%d µs in bucket %d = [%v, %v)", v, i, lo, hi)
		}
		if v >= 64 && (histHigh(i)-histLow(i))/histLow(i) > 1.0/histSub+1e-9 {
			t.Errorf("bucket %d of %d µs wider than 1/%d", i, v, histSub)
		}
	}
	if histBucket(-5) != 0 {
		t.Error("a negative round trip counts as 0")
	}
}

func TestHistQuantilesMerge(t *testing.T) {
	a, b := rttHist{}, rttHist{}
	for v := int64(1); v <= 50; v++ {
		a.add(v * 10) // 10..500
	}
	for v := int64(51); v <= 100; v++ {
		b.add(v * 10) // 510..1000
	}
	a.merge(b)
	if a.count() != 100 {
		t.Fatalf("count = %d, want 100", a.count())
	}
	for q, want := range map[float64]float64{0.5: 500, 0.99: 990, 0.01: 10} {
		if got := a.quantile(q); math.Abs(got-want) > 0.04*want+0.5 {
			t.Errorf("q%.2f = %v, want %v within 4%% (and half a µs)", q, got, want)
		}
	}
	if !math.IsNaN(rttHist{}.quantile(0.5)) {
		t.Error("an empty histogram has no median")
	}
}

// nstat -az output as nstat 230107 prints it.
const nstatSample = `#kernel
IpInReceives                    3071               0.0
TcpAttemptFails                 245                0.0
TcpExtListenOverflows           375                0.0
TcpExtListenDrops               376                0.0
TcpExtTCPSynRetrans             8                  0.0
`

func TestParseNstatAndDelta(t *testing.T) {
	after := parseNstat(nstatSample)
	if after["TcpExtListenOverflows"] != 375 || after["TcpExtListenDrops"] != 376 || after["IpInReceives"] != 3071 {
		t.Fatalf("parseNstat = %v", after)
	}
	if _, ok := after["#kernel"]; ok {
		t.Error("the header is not a counter")
	}
	d := nstatDelta(map[string]uint64{"TcpExtListenOverflows": 75, "TcpExtTCPSynRetrans": 8}, after)
	if d["TcpExtListenOverflows"] != 300 || d["TcpExtTCPSynRetrans"] != 0 || d["TcpExtListenDrops"] != 376 {
		t.Errorf("delta = %v", d)
	}
	out := map[string]float64{}
	stormCounters(out, map[string]uint64{"TcpExtTCPSynRetrans": 9}, d, map[string]uint64{"TcpExtListenOverflows": 2}, true)
	if out["proxy_listen_overflows"] != 300 || out["proxy_listen_drops"] != 376 || out["backend_listen_overflows"] != 2 || out["client_syn_retrans"] != 9 {
		t.Errorf("stormCounters = %v", out)
	}
	direct := map[string]float64{}
	stormCounters(direct, nil, d, nil, false)
	if _, ok := direct["proxy_listen_overflows"]; ok {
		t.Error("direct has no proxy listener to count")
	}
}

func TestParseSockstatTCPMem(t *testing.T) {
	b := []byte("sockets: used 523\nTCP: inuse 41 orphan 0 tw 3 alloc 45 mem 17\nUDP: inuse 2 mem 1\n")
	if p, ok := parseSockstatTCPMem(b); !ok || p != 17 {
		t.Errorf("TCP mem = %d, %v; want 17", p, ok)
	}
	if n, ok := parseSockstatUsed(b); !ok || n != 523 {
		t.Errorf("sockets used = %d, %v; want 523", n, ok)
	}
	if _, ok := parseSockstatTCPMem([]byte("UDP: inuse 2 mem 1\n")); ok {
		t.Error("no TCP line: not ok")
	}
}

func TestListensIn(t *testing.T) {
	// /proc/net/tcp of a namespace: 10.231.1.101:8000 listening (0A), a
	// connection from it (01).
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 6501E70A:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 6601E70A:1F40 0101E70A:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
`
	if !listensIn(text, netip.MustParseAddrPort("10.231.1.101:8000")) {
		t.Error("10.231.1.101:8000 listens")
	}
	if listensIn(text, netip.MustParseAddrPort("10.231.1.102:8000")) {
		t.Error("10.231.1.102:8000 only has an established connection")
	}
}

func TestPlanLL(t *testing.T) {
	p := planLL(10000, 0)
	if p.shards != 2 || p.clients != 1 || p.backends != 1 || p.period != 5*time.Second || p.window != 10*time.Second {
		t.Errorf("N=10000: %+v", p)
	}
	p = planLL(100000, 0)
	if p.shards != 12 || p.clients != 7 || p.backends != 8 || p.period != 20*time.Second || p.window != 20*time.Second {
		t.Errorf("N=100000: %+v", p)
	}
	if p.upgradeWait <= 20*time.Second {
		t.Errorf("the wait %v must outlast shutdown_timeout %s", p.upgradeWait, llShutdownTimeout)
	}
	if p := planLL(5000, 3); p.shards != 3 {
		t.Errorf("-longlived-instances 3: %d instances", p.shards)
	}
}

func TestLLL4lbConfigParsesAndFitsTheBudget(t *testing.T) {
	backends := []string{"10.231.2.1:9000", "10.231.2.2:9000"}
	cfg, err := config.Parse("l4lb.toml", []byte(llL4lbConfig("10.231.1.101:8000", backends, "")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.MaxConnections != llShardCap || len(cfg.Listeners) != 1 || len(cfg.Pools) != 1 {
		t.Fatalf("max_connections %d, %d listeners, %d pools", cfg.Global.MaxConnections, len(cfg.Listeners), len(cfg.Pools))
	}
	nb, err := config.Parse("l4lb.toml", []byte(llL4lbConfig("10.231.1.101:8000", backends, llNoBreaker)))
	if err != nil {
		t.Fatal(err)
	}
	if f := nb.Pools["ws"].Breaker.Failures; f != 1000000 {
		t.Errorf("l4lb-nobreaker: breaker failures = %d", f)
	}
	// One instance's connections fit the machine's fd limit with l4lb's
	// reserve, so l4lb never refuses what the plan gives it.
	b := server.DeriveBudget(20000, llShardCap, 1, len(backends), 0, 0)
	if msg := b.OverLimit(); msg != "" {
		t.Errorf("llShardCap %d over the 20000-fd budget: %s (needs %d)", llShardCap, msg, b.Needed())
	}
}

func TestLLPeerConfigs(t *testing.T) {
	be := []string{"10.231.2.1:9000"}
	mustContain(t, "haproxy", llHAProxyConfig("10.231.1.101:8000", be, 20000),
		"nbthread 1", "maxconn 9500", "mode tcp", "timeout client 1h", "bind 10.231.1.101:8000", "server s0 10.231.2.1:9000")
	mustContain(t, "nginx", llNginxConfig("10.231.1.101:8000", be, 20000, "/tmp/x", nginxStreamModule),
		"worker_processes 1;", "worker_rlimit_nofile 20000;", "worker_connections 19500;",
		"listen 10.231.1.101:8000;", "proxy_timeout 1h;", "server 10.231.2.1:9000;")
}

func TestFinishLLSubtractsDirect(t *testing.T) {
	sr := newLLResult("longlived", 100)
	sr.add("direct", KindDirect, map[string]float64{"slab_kb_per_conn": 7, "sockmem_kb_per_conn": 1}, 0, nil)
	sr.add("l4lb", KindSubject, map[string]float64{"slab_kb_per_conn": 15, "sockmem_kb_per_conn": 1.5}, 0, nil)
	finishLL(sr)
	if got := sr.summary("l4lb", "kernel_kb_per_conn").Median; math.Abs(got-8) > 1e-9 {
		t.Errorf("l4lb kernel KB/conn = %v, want slab 15 - direct's 7 = 8 (socket buffers apart)", got)
	}
	if got := sr.summary("direct", "kernel_kb_per_conn"); got.Rounds != 0 {
		t.Errorf("direct has no kernel figure of its own, got %+v", got)
	}
}

func TestLowerBoundRendering(t *testing.T) {
	sr := newLLResult("longlived", 100)
	sr.add("nginx", KindPeer, map[string]float64{"upgrade_s": 35}, 0, nil)
	sr.add("l4lb", KindSubject, map[string]float64{"upgrade_s": 1.5}, 0, nil)
	sr.markLowerBound("nginx", "upgrade_s")
	var b strings.Builder
	writeScenarioMD(&b, sr)
	md := b.String()
	if !strings.Contains(md, "| > 35.00 |") || strings.Contains(md, "> 1.5") {
		t.Errorf("nginx's upgrade_s should read \"> 35.00\", l4lb's plainly:\n%s", md)
	}
	recs := records([]*ScenarioResult{sr})
	for _, r := range recs {
		if r.Metric == "upgrade_s" && r.LowerBound != (r.System == "nginx") {
			t.Errorf("record %+v", r)
		}
	}
}

func TestSpliceLLSection(t *testing.T) {
	sec := func(n int, body string) string {
		k := llSectionKey(n)
		return "\n<!-- begin " + k + " -->\n" + body + "\n<!-- end " + k + " -->\n"
	}
	doc := "# page\n\ntext\n"
	doc = spliceLLSection(doc, llSectionKey(10000), sec(10000, "first"))
	doc = spliceLLSection(doc, llSectionKey(100000), sec(100000, "big"))
	doc = spliceLLSection(doc, llSectionKey(10000), sec(10000, "second"))
	if strings.Contains(doc, "first") || strings.Count(doc, "second") != 1 || strings.Count(doc, "big") != 1 {
		t.Fatalf("splice:\n%s", doc)
	}
	if !strings.HasPrefix(doc, "# page\n\ntext\n") || strings.Index(doc, "second") > strings.Index(doc, "big") {
		t.Errorf("the page stays first and a section keeps its place:\n%s", doc)
	}
}

func TestLonglivedFlags(t *testing.T) {
	o, err := parseFlags([]string{"-scenario", "longlived", "-longlived-conns", "10000,100000", "-longlived-systems", "l4lb,nginx"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.longlived || len(o.ll.conns) != 2 || o.ll.conns[1] != 100000 || strings.Join(o.ll.systems, ",") != "l4lb,nginx" {
		t.Errorf("options = %+v", o.ll)
	}
	for _, bad := range [][]string{
		{"-scenario", "longlived,idle"},
		{"-scenario", "longlived", "-longlived-conns", "0"},
		{"-scenario", "longlived", "-longlived-systems", "goproxy"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestLLAddrsStayInTheScenarioNetwork(t *testing.T) {
	if _, err := parseLLAddrs("10.231.1.101:8000,127.0.0.1:80", true); err == nil {
		t.Error("an address outside 10.231.0.0/16 was accepted")
	}
	a, err := parseLLAddrs("10.231.1.1, 10.231.1.2", false)
	if err != nil || len(a) != 2 || a[1].Addr != [4]byte{10, 231, 1, 2} {
		t.Errorf("sources = %v, %v", a, err)
	}
}

func TestParseHandover(t *testing.T) {
	log := `time=2026-12-01T13:58:09.507Z level=INFO msg="upgrade: the new process serves; this one stops accepting and drains" new_pid=29243 took=11ms
time=2026-12-01T13:58:10.100Z level=INFO msg="upgrade: handed over established connections" relays=8334 sessions=0 took=1.25s
`
	r, took, ok := parseHandover(log)
	if !ok || r != 8334 || took != 1250*time.Millisecond {
		t.Errorf("parseHandover = %d, %v, %v; want 8334, 1.25s, true", r, took, ok)
	}
	if _, _, ok := parseHandover(`level=INFO msg="handed over: draining open connections" open=1000`); ok {
		t.Error("today's drain line is no hand-over")
	}
}

func TestRenderLLSection(t *testing.T) {
	sec := llSection{plan: planLL(10000, 0), meta: []string{"2 CPUs"}, about: []string{"l4lb: from this tree"},
		ll: newLLResult("longlived", 10000), storm: newStormResult(10000)}
	sec.ll.add("l4lb", KindSubject, map[string]float64{"conns": 10000}, 0, nil)
	sec.storm.add("l4lb", KindSubject, map[string]float64{"recover_s": 1.5}, 0, nil)
	md := renderLLSection(sec)
	for _, want := range []string{"<!-- begin longlived N=10000 -->", "<!-- end longlived N=10000 -->",
		"## longlived, N = 10000", "## storm, N = 10000", "- 2 CPUs\n", "- l4lb: from this tree\n",
		"Reading it: every client opens", "Reading it: with N held"} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}
