package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

func udpTestRoutes(spec systemSpec) []route {
	return placeSystem(spec, 2, 30000, true).routes
}

func TestPlaceSystemUDP(t *testing.T) {
	names := func(rs []route) (out []string) {
		for _, r := range rs {
			out = append(out, r.name)
		}
		return out
	}
	if got := names(placeSystem(l4lbSystem("l4lb", nil), 1, 30000, false).routes); strings.Contains(strings.Join(got, ","), "udp") {
		t.Errorf("udp scenario not selected, yet UDP routes: %v", got)
	}
	l := placeSystem(l4lbSystem("l4lb", nil), 1, 30000, true)
	if !l.hasUDP() || !l.hasRoute(routeUDPRR) || !l.hasRoute(routeUDPOneWay) || l.hasRoute(routeUDPNoReply) {
		t.Errorf("l4lb routes = %v", names(l.routes))
	}
	if r := l.route(routeUDPRR); r.listen != "127.0.0.1:30514" || r.backends[0] != "127.0.0.1:30003" || r.udp != udpRRMode {
		t.Errorf("udp_rr = %+v", r)
	}
	if r := l.route(routeUDPOneWay); r.listen != "127.0.0.1:30515" || r.backends[0] != "127.0.0.1:30004" || r.udp != udpOneWayMode {
		t.Errorf("udp_oneway = %+v", r)
	}
	n := placeSystem(nginxSystem(), 2, 30000, true)
	if r := n.route(routeUDPNoReply); r.listen != "127.0.0.1:30526" || r.backends[0] != "127.0.0.1:30004" || r.udp != udpNoReplyMode {
		t.Errorf("nginx udp_noreply = %+v", r)
	}
	for _, spec := range []systemSpec{haproxySystem(), goproxySystem()} {
		s := placeSystem(spec, 3, 30000, true)
		if s.hasUDP() || s.noUDPReason() != spec.noUDP || spec.noUDP == "" {
			t.Errorf("%s: UDP routes %v, reason %q", spec.name, names(s.routes), s.noUDPReason())
		}
	}
	// direct talks to the UDP backends themselves.
	d := placeSystem(directSystem(), 0, 30000, true)
	if d.addr(routeUDPRR) != "127.0.0.1:30003" || d.addr(routeUDPOneWay) != "127.0.0.1:30004" {
		t.Errorf("direct UDP addrs %s %s", d.addr(routeUDPRR), d.addr(routeUDPOneWay))
	}
	l.dropUDP("refused")
	if l.hasUDP() || l.noUDPReason() != "refused" || !l.hasRoute(routeEcho) {
		t.Errorf("after dropUDP: %v, %q", names(l.routes), l.noUDPReason())
	}
}

func TestNginxConfigUDP(t *testing.T) {
	cfg := nginxConfig(udpTestRoutes(nginxSystem()), 1, 20000, "/tmp/x", "")
	mustContain(t, "nginx", cfg,
		"server { listen 127.0.0.1:30524 udp reuseport; proxy_pass udp_rr; proxy_responses 1; proxy_timeout 10s; }",
		"server { listen 127.0.0.1:30525 udp reuseport; proxy_pass udp_oneway; proxy_timeout 10s; }",
		"server { listen 127.0.0.1:30526 udp reuseport; proxy_pass udp_noreply; proxy_responses 0; proxy_timeout 10s; }",
		"upstream udp_rr {\n        server 127.0.0.1:30003;\n    }",
		"worker_rlimit_nofile 20000;",
	)
	if n := strings.Count(cfg, "proxy_half_close"); n != 4 {
		t.Errorf("proxy_half_close on %d servers, want the 4 TCP ones only", n)
	}
}

func TestHaproxyIgnoresUDPRoutes(t *testing.T) {
	routes := udpTestRoutes(nginxSystem()) // with UDP routes, as no placement would give them
	if cfg := haproxyConfig(routes, 1, 20000); strings.Contains(cfg, "udp") {
		t.Errorf("haproxy rendered a UDP route:\n%s", cfg)
	}
}

// The generated UDP listeners are what l4lb's own parser accepts, with the
// session keys the scenario relies on.
func TestL4lbConfigUDP(t *testing.T) {
	text := l4lbConfig(udpTestRoutes(l4lbSystem("l4lb", nil)), 1, "")
	cfg, err := config.Parse("bench.toml", []byte(text))
	if err != nil {
		t.Fatalf("l4lb refuses the generated config: %v\n%s", err, text)
	}
	var udp int
	for _, l := range cfg.Listeners {
		if l.Protocol != config.ProtocolUDP {
			continue
		}
		udp++
		maxSessions := udpOWMaxSessions
		if l.Name == routeUDPRR {
			maxSessions = udpRRMaxSessions
		}
		if l.SessionTimeout != 10*time.Second || l.MaxSessions != maxSessions || l.Pool != l.Name {
			t.Errorf("listener %s: %+v", l.Name, l)
		}
		want := 0
		if l.Name == routeUDPRR {
			want = 1
		}
		if l.Responses != want || l.Requests != 0 {
			t.Errorf("listener %s: responses %d requests %d, want %d and 0", l.Name, l.Responses, l.Requests, want)
		}
		if p := cfg.Pools[l.Pool]; p.Health.Enabled || p.Protocol != config.ProtocolUDP || len(p.Backends) != 1 {
			t.Errorf("pool %s: health %v, protocol %s, %d backends", l.Pool, p.Health.Enabled, p.Protocol, len(p.Backends))
		}
	}
	if udp != 2 {
		t.Errorf("%d UDP listeners, want 2:\n%s", udp, text)
	}
}

func TestParseUDPDrops(t *testing.T) {
	text := `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            
 5844: 0100007F:D472 0100007F:238F 01 00000000:00000000 00:00000000 00000000     0        0 21126610 2 00000000a54ab2d4 0      
 8691: 0100007F:1F91 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 21127424 2 00000000d18ad50d 7      
 8691: 0100007F:1F91 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 21127423 2 0000000096afc2ae 5      
 9711: 0100007F:238D 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 21126592 2 000000008aaa9e57 3      
`
	for _, tc := range []struct {
		port int
		want uint64
	}{{0x1F91, 12}, {0x238D, 3}, {0x238F, 0}, {0xD472, 0}, {1, 0}} {
		if got := parseUDPDrops([]byte(text), tc.port); got != tc.want {
			t.Errorf("port %d: %d drops, want %d", tc.port, got, tc.want)
		}
	}
}

func TestIdleRing(t *testing.T) {
	r := newIdleRing(3)
	for i := range 3 {
		r.push(i)
	}
	var got []int
	for range 5 {
		i := r.pop()
		got = append(got, i)
		r.push(i)
	}
	if want := []int{0, 1, 2, 0, 1}; !equalInts(got, want) || r.size != 3 {
		t.Errorf("rotation %v (size %d), want %v", got, r.size, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestUDPFinish(t *testing.T) {
	sr := &ScenarioResult{Scenario: "udp", Metrics: udpScenario{}.metrics()}
	sr.add("direct", KindDirect, map[string]float64{"rr_dgram_per_s": 500000}, 0, nil)
	sr.markNA("haproxy", KindPeer, haproxyNoUDP)
	for _, round := range []struct{ l4lb, nginx, l4lbOW, nginxOW, nginxR0 float64 }{
		{4, 6, 2, 3, 9}, {5, 6, 2, 3.2, 8}, {4, 8, 2.5, 3, 9},
	} {
		sr.add("l4lb", KindSubject, map[string]float64{"rr_cpu_us_per_dgram": round.l4lb, "ow_cpu_us_per_dgram": round.l4lbOW}, 0, nil)
		sr.add("nginx", KindPeer, map[string]float64{"rr_cpu_us_per_dgram": round.nginx, "ow_cpu_us_per_dgram": round.nginxOW,
			"ow_r0_cpu_us_per_dgram": round.nginxR0}, 0, nil)
	}
	udpScenario{}.finish(sr)
	rows := map[string]*SystemRow{}
	for _, r := range sr.Rows {
		rows[r.System] = r
	}
	// Paired: 6/4, 6/5, 8/4 → median 1.5; one-way 3/2, 3.2/2, 3/2.5 → 1.5.
	if s := summarize(rows["l4lb"].Samples["rr_core_vs_nginx"]); s.Median != 1.5 || s.Min != 1.2 || s.Max != 2 {
		t.Errorf("l4lb rr per core vs nginx = %+v", s)
	}
	if s := summarize(rows["nginx"].Samples["ow_core_vs_nginx"]); s.Median != 1 || s.Rounds != 3 {
		t.Errorf("nginx vs itself = %+v", s)
	}
	if s := summarize(rows["direct"].Samples["rr_core_vs_nginx"]); s.Rounds != 0 {
		t.Errorf("direct has no proxy CPU, yet a ratio: %+v", s)
	}
	if _, ok := rows["haproxy"].Samples["rr_core_vs_nginx"]; ok {
		t.Error("an n/a row got figures")
	}
	notes := strings.Join(sr.Notes, "\n")
	for _, want := range []string{
		"request/response 1.50× [1.20–2.00] (met), one-way 1.50× [1.20–1.60] (met)",
		"one-way against nginx with proxy_responses 0: 4.00× [3.60–4.50]",
		"rr: 512 client sockets",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}

	md := renderMarkdown(report{results: []*ScenarioResult{sr}})
	for _, want := range []string{
		"| haproxy |" + strings.Repeat(" n/a |", len(sr.Metrics)) + " - | - |",
		"- haproxy: n/a: HAProxy's community edition has no UDP proxying",
		"| l4lb | - / - | - / - | - / - | - / 0.67 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestUDPFinishWithoutPeer(t *testing.T) {
	sr := &ScenarioResult{Scenario: "udp", Metrics: udpScenario{}.metrics()}
	sr.add("l4lb", KindSubject, map[string]float64{"rr_cpu_us_per_dgram": 4}, 0, nil)
	udpScenario{}.finish(sr)
	if !strings.Contains(strings.Join(sr.Notes, "\n"), "not measured, nginx did not run") {
		t.Errorf("notes = %q", sr.Notes)
	}
	sr = &ScenarioResult{Scenario: "udp", Metrics: udpScenario{}.metrics()}
	sr.markNA("l4lb", KindSubject, "this l4lb does not serve UDP")
	sr.add("nginx", KindPeer, map[string]float64{"rr_cpu_us_per_dgram": 6}, 0, nil)
	udpScenario{}.finish(sr)
	if !strings.Contains(strings.Join(sr.Notes, "\n"), "not measured, l4lb is n/a") {
		t.Errorf("notes = %q", sr.Notes)
	}
}

func TestPairedRatio(t *testing.T) {
	nan := math.NaN()
	got := pairedRatio([]float64{6, nan, 8}, []float64{3, 4, 0, 2})
	want := []float64{2, nan, nan, nan} // NaN over, by zero, and a round xs lacks
	for i := range want {
		if got[i] != want[i] && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
			t.Errorf("pairedRatio = %v, want %v", got, want)
			break
		}
	}
}

func TestOneWayLossPct(t *testing.T) {
	if p := (udpOneWayResult{sent: 200, lost: 3}).lossPct(); p != 1.5 {
		t.Errorf("loss = %v%%", p)
	}
	if p := (udpOneWayResult{}).lossPct(); p != 0 {
		t.Errorf("nothing sent: %v%%", p)
	}
}
