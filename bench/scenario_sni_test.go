package main

import (
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

func sniTestSystem(spec systemSpec) *system {
	s := placeSystem(spec, 2, 30000, false)
	placeSNI(s, 30000)
	return s
}

func TestPlaceSNI(t *testing.T) {
	r := sniTestSystem(l4lbSystem("l4lb", nil)).route(routeSNI)
	if r.listen != "127.0.0.1:30527" || len(r.backends) != 1 || r.backends[0] != "127.0.0.1:30007" {
		t.Errorf("sni listener %s, fallback %v", r.listen, r.backends)
	}
	if len(r.sni) != 2 || r.sni[0].backend != "127.0.0.1:30005" || r.sni[1].backend != "127.0.0.1:30006" ||
		r.sni[0].host == r.sni[1].host || r.sni[0].pool == r.sni[1].pool {
		t.Errorf("sni routes %+v", r.sni)
	}
	// The client checks tags against pool order; the backend role stamps
	// them in the order of its -tls-echo list.
	args := strings.Join(sniBackendArgs(30000, sniCert{certPath: "c", keyPath: "k"}), " ")
	if args != "-tls-echo 127.0.0.1:30005,127.0.0.1:30006,127.0.0.1:30007 -tls-cert c -tls-key k" {
		t.Errorf("backend args %q", args)
	}
	if goproxySystem().noSNI == "" {
		t.Error("goproxy cannot route by name: it needs its n/a reason")
	}
	for _, spec := range []systemSpec{directSystem(), l4lbSystem("l4lb", nil), haproxySystem(), nginxSystem()} {
		if spec.noSNI != "" {
			t.Errorf("%s: noSNI %q", spec.name, spec.noSNI)
		}
	}
}

// The generated sni listener is what l4lb's own parser accepts: two
// routes to their pools, the listener's pool the fallback.
func TestL4lbConfigSNI(t *testing.T) {
	s := sniTestSystem(l4lbSystem("l4lb", nil))
	text := l4lbConfig(s.routes, 1, "")
	cfg, err := config.Parse("bench.toml", []byte(text))
	if err != nil {
		t.Fatalf("l4lb refuses the generated config: %v\n%s", err, text)
	}
	var found bool
	for _, l := range cfg.Listeners {
		if l.Name != routeSNI {
			if len(l.Routes) != 0 {
				t.Errorf("listener %s has routes", l.Name)
			}
			continue
		}
		found = true
		if l.Pool != routeSNI || l.InspectTimeout != 5*time.Second || len(l.Routes) != len(sniPools) {
			t.Fatalf("sni listener: pool %s, inspect_timeout %v, %d routes", l.Pool, l.InspectTimeout, len(l.Routes))
		}
		for k, rt := range l.Routes {
			p := sniPools[k]
			if len(rt.SNI) != 1 || rt.SNI[0] != p.host || rt.Pool != p.pool {
				t.Errorf("route %d = %+v, want %s -> %s", k, rt, p.host, p.pool)
			}
			pool := cfg.Pools[p.pool]
			if pool.Health.Enabled || len(pool.Backends) != 1 || pool.Backends[0].Addr != s.route(routeSNI).sni[k].backend {
				t.Errorf("pool %s: health %v, backends %+v", p.pool, pool.Health.Enabled, pool.Backends)
			}
		}
	}
	if !found {
		t.Fatalf("no sni listener:\n%s", text)
	}
}

func TestHaproxyConfigSNI(t *testing.T) {
	cfg := haproxyConfig(sniTestSystem(haproxySystem()).routes, 1, 20000)
	mustContain(t, "haproxy", cfg,
		"frontend sni\n    bind 127.0.0.1:30527\n    tcp-request inspect-delay 5s\n",
		"tcp-request content accept if { req_ssl_hello_type 1 }",
		"use_backend sni_api if { req.ssl_sni -i api.bench.test }",
		"use_backend sni_web if { req.ssl_sni -i web.bench.test }",
		"default_backend sni_fallback",
		"backend sni_api\n    server s0 127.0.0.1:30005\n",
		"backend sni_web\n    server s0 127.0.0.1:30006\n",
		"backend sni_fallback\n    server s0 127.0.0.1:30007\n",
	)
	if strings.Contains(cfg, "listen sni") {
		t.Error("the sni route must be a frontend with backends, not a listen section")
	}
	checkWith(t, "haproxy", cfg, func(path string) *exec.Cmd { return exec.Command("haproxy", "-c", "-q", "-f", path) })
}

func TestNginxConfigSNI(t *testing.T) {
	dir := t.TempDir()
	module := ""
	if _, err := os.Stat(nginxStreamModule); err == nil {
		module = nginxStreamModule
	}
	cfg := nginxConfig(sniTestSystem(nginxSystem()).routes, 1, 20000, dir, module)
	mustContain(t, "nginx", cfg,
		"upstream sni {\n        server 127.0.0.1:30007;\n    }",
		"upstream sni_api {\n        server 127.0.0.1:30005;\n    }",
		"upstream sni_web {\n        server 127.0.0.1:30006;\n    }",
		"map $ssl_preread_server_name $sni_upstream {\n        hostnames;\n        api.bench.test sni_api;\n        web.bench.test sni_web;\n        default sni;\n    }",
		"server { listen 127.0.0.1:30527 reuseport; ssl_preread on; preread_timeout 5s; proxy_pass $sni_upstream; proxy_half_close on; }",
	)
	if strings.Contains(cfg, "proxy_pass sni;") {
		t.Error("the sni server must pass to the mapped upstream")
	}
	checkWith(t, "nginx", cfg, func(path string) *exec.Cmd {
		return exec.Command("nginx", "-t", "-q", "-p", dir, "-c", path, "-e", filepath.Join(dir, "nginx.err"))
	})
}

// checkWith has the installed proxy check cfg (it is skipped when the
// proxy is not installed): the directives are the proxy's own, not only
// the strings above.
func checkWith(t *testing.T, bin, cfg string, cmd func(path string) *exec.Cmd) {
	t.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		t.Logf("%s not installed: its own check skipped", bin)
		return
	}
	path := filepath.Join(t.TempDir(), bin+".cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cmd(path).CombinedOutput(); err != nil {
		t.Errorf("%s refuses the generated config: %v: %s\n%s", bin, err, out, cfg)
	}
}

// added_* pairs each round with direct's same round.
func TestAddedOverDirect(t *testing.T) {
	sr := &ScenarioResult{Metrics: []MetricDef{{Name: "p50_us"}}}
	sr.add("direct", KindDirect, map[string]float64{"p50_us": 100}, 0, nil)
	sr.add("direct", KindDirect, map[string]float64{"p50_us": 200}, 0, nil)
	sr.add("l4lb", KindSubject, map[string]float64{"p50_us": 130}, 0, nil)
	sr.add("l4lb", KindSubject, map[string]float64{"p50_us": 240}, 0, nil)
	sr.add("l4lb", KindSubject, map[string]float64{"p50_us": 250}, 0, nil) // a round direct lacks
	sr.addedOverDirect("p50_us", "added")
	got := sr.Rows[1].Samples["added"]
	if len(got) != 3 || got[0] != 30 || got[1] != 40 || !math.IsNaN(got[2]) {
		t.Errorf("added = %v, want [30 40 NaN]", got)
	}
	if d := sr.Rows[0].Samples["added"]; d[0] != 0 || d[1] != 0 {
		t.Errorf("direct's own added = %v, want zeros", d)
	}
}

func TestSNITargetNote(t *testing.T) {
	sr := &ScenarioResult{Metrics: sniScenario{}.metrics()}
	for i, c := range []struct{ direct, l4lb, haproxy, nginx float64 }{{800, 850, 900, 870}, {700, 760, 790, 800}} {
		sr.add("direct", KindDirect, map[string]float64{"p50_us": c.direct}, 0, nil)
		sr.add("l4lb", KindSubject, map[string]float64{"p50_us": c.l4lb, "cpu_us_per_conn": 100 + float64(i)*20}, 0, nil)
		sr.add("haproxy", KindPeer, map[string]float64{"p50_us": c.haproxy, "cpu_us_per_conn": 120}, 0, nil)
		sr.add("nginx", KindPeer, map[string]float64{"p50_us": c.nginx, "cpu_us_per_conn": 100}, 0, nil)
	}
	sr.markNA("goproxy", KindPeer, "no SNI routing")
	sniScenario{}.finish(sr)
	if len(sr.Notes) != 1 {
		t.Fatalf("notes %q, want one for l4lb", sr.Notes)
	}
	for _, want := range []string{
		"cpu_us_per_conn 110.0 vs nginx's 100.0 (not met)",
		"added_p50_us 55.00 vs nginx's 85.00 (met)", // l4lb adds 50 and 60, haproxy 100 and 90, nginx 70 and 100
		"over haproxy's, paired by round: 0.92× [0.83–1.00]",
		"over nginx's, paired by round: 1.10× [1.00–1.20]",
	} {
		if !strings.Contains(sr.Notes[0], want) {
			t.Errorf("note lacks %q:\n%s", want, sr.Notes[0])
		}
	}
}

// The client is the case issue 29 is about: Go's default key shares
// (X25519MLKEM768) make a ClientHello longer than 1,200 bytes.
func TestSNIClientHelloIsPostQuantumSized(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0") // the kernel's port: listenLoopback wants one

	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		// No server answers: the handshake fails once the test closes it.
		done <- sniOnce(l.Addr().String(), sniPools[0].host, nil, make([]byte, 8), make([]byte, 8))
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-done
	if n := int(hdr[3])<<8 | int(hdr[4]); hdr[0] != 22 || n <= 1200 {
		t.Errorf("first record: type %d, %d bytes; want a handshake record over 1200 bytes", hdr[0], n)
	}
}
