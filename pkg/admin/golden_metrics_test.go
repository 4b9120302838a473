package admin

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
	"github.com/l4lb/l4lb/pkg/splice"
	"github.com/l4lb/l4lb/pkg/syslog"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/metrics.golden.* from the current code")

// goldenConfig: three pools, one of them UDP, an IPv6 backend, and an
// address in two pools (so label order and sorting across pools count).
const goldenConfig = `
[[listener]]
name = "web"
bind = "127.0.0.1:18080"
pool = "web"
[[listener]]
name = "api"
bind = "127.0.0.1:18081"
pool = "api"
[[listener]]
name = "dns"
bind = "127.0.0.1:18053"
protocol = "udp"
pool = "dns"
[pool.web]
algorithm = "maglev"
[pool.web.health]
enabled = false
[[pool.web.backend]]
addr = "10.0.0.2:8080"
weight = 3
[[pool.web.backend]]
addr = "10.0.0.10:8080"
[[pool.web.backend]]
addr = "[2001:db8::1]:8080"
[pool.api]
algorithm = "least-conn"
[pool.api.health]
enabled = false
[[pool.api.backend]]
addr = "10.0.0.2:8080"
backup = true
[[pool.api.backend]]
addr = "10.0.1.1:9000"
[pool.dns]
[pool.dns.health]
enabled = false
[[pool.dns.backend]]
addr = "10.0.2.1:53"
`

// goldenSetup is a handler over goldenConfig's pools, a proxy server with a
// TCP and a UDP listener, a pipe pool and a connection cap, with dials,
// connect times in several buckets, bytes, a disabled, a draining and a
// reweighted backend, and a pool serving from its backup (api's primary
// is disabled).
func goldenSetup(t *testing.T) http.Handler {
	t.Helper()
	cfg, err := config.Parse("golden.toml", []byte(goldenConfig))
	if err != nil {
		t.Fatal(err)
	}
	store := breaker.NewMemoryStore(nil)
	pools := map[string]*pool.Pool{}
	var list []*pool.Pool
	for _, name := range cfg.PoolNames {
		p, err := pool.New(cfg.Pools[name], pool.Deps{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		pools[name] = p
		list = append(list, p)
	}
	ctx := context.Background()
	web, api, dns := pools["web"], pools["api"], pools["dns"]

	b := web.Backends()[0]
	for range 5 {
		web.EndDial(web.BeginDial(b, false), dialer.Success)
	}
	web.EndDial(web.BeginDial(b, false), dialer.Failure)
	web.EndDial(web.BeginDial(b, true), dialer.Success)
	web.EndRelay(b)
	for _, d := range []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 300 * time.Microsecond,
		2 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 120 * time.Millisecond, 3 * time.Second, 9 * time.Second} {
		b.ObserveConnect(d)
	}
	b.Meter.ToBackend.Store(123456789)
	b.Meter.ToClient.Store(987654321012)

	b = web.Backends()[2]
	web.EndDial(web.BeginDial(b, false), dialer.Failure)
	web.EndDial(web.BeginDial(b, false), dialer.Failure)
	b.ObserveConnect(1500 * time.Microsecond)
	if err := web.SetWeight(ctx, b, 7); err != nil {
		t.Fatal(err)
	}
	if err := web.Drain(ctx, web.Backends()[1], time.Hour); err != nil {
		t.Fatal(err)
	}
	web.PortsExhausted()
	web.PortsExhausted()

	b = api.Backends()[0]
	api.EndDial(api.BeginDial(b, false), dialer.Success)
	b.ObserveConnect(40 * time.Millisecond)
	b.ObserveConnect(600 * time.Millisecond)
	b.Meter.ToBackend.Store(42)
	if err := api.Disable(ctx, api.Backends()[1]); err != nil {
		t.Fatal(err)
	}

	b = dns.Backends()[0]
	dns.BeginDial(b, false)
	b.ObserveConnect(0)

	s, err := server.New(server.Config{Loops: 2, MaxConnections: 50, Frontends: []server.Frontend{
		{Name: "web", Bind: "127.0.0.1:0", Pool: web},
		{Name: "dns", Bind: "127.0.0.1:0", Protocol: "udp", Pool: dns, SessionTimeout: time.Minute, MaxSessions: 10},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	src := Sources{Pools: list, Server: s, Pipes: splice.NewPipePool(splice.PipePoolConfig{}), MaxConnections: 50, Version: "v9.9.9"}
	src.Syslog = []SyslogOutput{{Log: "access", Writer: absentSyslog(t, 3)}}
	return handler(src, "", newLimitListener(nil, 16, nil), nil)
}

// goldenScrape GETs /metrics from h with accept (none: "").
func goldenScrape(t *testing.T, h http.Handler, accept string) []byte {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Host = "127.0.0.1"
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics (Accept %q): %d %s", accept, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// loopSample is a sample of an event loop's series, whose values depend on
// the loops' scheduling.
var loopSample = regexp.MustCompile(`^(l4lb_loop_[a-z_]+\{loop="[0-9]+"\}) [^\n]*`)

// normalizeText drops the process and Go runtime families, blanks the event
// loops' values and names the Go version generically.
func normalizeText(body []byte) string {
	var out strings.Builder
	for line := range strings.Lines(string(body)) {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		line = loopSample.ReplaceAllString(line, "$1 LOOP_VALUE")
		out.WriteString(line)
	}
	return strings.ReplaceAll(out.String(), `goversion="`+runtime.Version()+`"`, `goversion="GOVERSION"`)
}

// normalizeProto is normalizeText for the delimited protobuf format:
// the l4lb families, re-encoded deterministically, loop values zeroed.
func normalizeProto(t *testing.T, body []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	r := bytes.NewReader(body)
	for {
		mf := &dto.MetricFamily{}
		if err := (protodelim.UnmarshalOptions{MaxSize: -1}).UnmarshalFrom(r, mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(mf.GetName(), "l4lb_") {
			continue
		}
		for _, m := range mf.Metric {
			if strings.HasPrefix(mf.GetName(), "l4lb_loop_") {
				zero := 0.0
				if m.Counter != nil {
					m.Counter.Value = &zero
				}
				if m.Gauge != nil {
					m.Gauge.Value = &zero
				}
			}
			for _, l := range m.Label {
				if l.GetName() == "goversion" {
					v := "GOVERSION"
					l.Value = &v
				}
			}
		}
		if _, err := (protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}).MarshalTo(&out, mf); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// /metrics is a contract: every l4lb family's name, help, type, labels and
// values, byte for byte, in the text, OpenMetrics and protobuf formats.
// The goldens were made by the code before the scrape was optimised.
func TestMetricsExpositionGolden(t *testing.T) {
	h := goldenSetup(t)
	for _, f := range []struct {
		file, accept string
		norm         func([]byte) []byte
	}{
		{"metrics.golden.txt", "", func(b []byte) []byte { return []byte(normalizeText(b)) }},
		{"metrics.golden.om", "application/openmetrics-text; version=1.0.0", func(b []byte) []byte { return []byte(normalizeText(b)) }},
		{"metrics.golden.pb", string(expfmt.NewFormat(expfmt.TypeProtoDelim)), func(b []byte) []byte { return normalizeProto(t, b) }},
	} {
		got := f.norm(goldenScrape(t, h, f.accept))
		path := filepath.Join("testdata", f.file)
		if *updateGolden {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: /metrics differs from the golden (Accept %q)\n%s", f.file, f.accept, firstDiff(string(want), string(got)))
		}
	}
}

// firstDiff shows where got first departs from want, line by line.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + itoa(int64(i+1)) + ":\n want " + w + "\n  got " + g
		}
	}
	return "(same lines, different bytes)"
}

// Scrapes at once share the constant label pairs and each build their
// own series: every one matches the golden (run with -race).
func TestMetricsConcurrentScrapesGolden(t *testing.T) {
	h := goldenSetup(t)
	want, err := os.ReadFile(filepath.Join("testdata", "metrics.golden.txt"))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			for range 5 {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Host = "127.0.0.1"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if got := normalizeText(rec.Body.Bytes()); got != string(want) {
					errs <- firstDiff(string(want), got)
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if e := <-errs; e != "" {
			t.Errorf("a concurrent scrape differs from the golden: %s", e)
		}
	}
}

// absentSyslog is a syslog writer to a socket that does not exist, with
// n messages dropped as unreachable (its clock never moves: no retry).
func absentSyslog(t *testing.T, n int) *syslog.Writer {
	t.Helper()
	w, err := syslog.Open(syslog.Config{Address: syslog.Address{Network: syslog.NetworkUnixgram, Path: filepath.Join(t.TempDir(), "none")},
		Clock: clock.NewFake(time.Unix(1e9, 0))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for range n {
		w.Send(syslog.SeverityInfo, time.Unix(1e9, 0), []byte("x"))
	}
	return w
}
