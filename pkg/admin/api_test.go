package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

const testConfig = `
[[listener]]
name = "web"
bind = "127.0.0.1:18080"
pool = "web"
[pool.web]
algorithm = "maglev"
[[pool.web.backend]]
addr = "127.0.0.1:9001"
weight = 3
[[pool.web.backend]]
addr = "[::1]:9001"
backup = true
[pool.web.health]
enabled = false
`

func newTestServer(t *testing.T) (*httptest.Server, *pool.Pool) {
	t.Helper()
	return newTokenServer(t, "")
}

// newTokenServer serves the test pool with Handler, token required when
// not "".
func newTokenServer(t *testing.T, token string) (*httptest.Server, *pool.Pool) {
	t.Helper()
	testnet.CheckLeaks(t)
	p := testPool(t)
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}, MaxConnections: 100}, token, nil))
	t.Cleanup(srv.Close)
	return srv, p
}

// do is send without a body.
func do(t *testing.T, method, url string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	return send(t, method, url, "", hdr)
}

// newRequest is a request with body and headers ("Host" sets the Host).
func newRequest(t *testing.T, method, url, body string, hdr map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	return req
}

// send makes a request with body and headers ("Host" sets the Host);
// it returns the status and the JSON body decoded.
func send(t *testing.T, method, url, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(newRequest(t, method, url, body, hdr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s %s: body is not JSON: %q", method, url, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	return resp.StatusCode, v
}

func TestListPoolsShape(t *testing.T) {
	srv, _ := newTestServer(t)
	code, v := do(t, "GET", srv.URL+"/api/v1/pools", nil)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	raw, _ := json.Marshal(v)
	want := `{"pools":[{"algorithm":"maglev","backends":[` +
		`{"active_connections":0,"addr":"127.0.0.1:9001","breaker":{"cooldown_left_seconds":0,"generation":0,"state":"closed"},"bytes_to_backend":0,"bytes_to_client":0,"configured_weight":3,"dial_failures":0,"disabled":false,"draining":false,"health":"up","max_connections":0,"probe_failures":0,"role":"primary","source":"file","usable":true,"weight":3},` +
		`{"active_connections":0,"addr":"[::1]:9001","breaker":{"cooldown_left_seconds":0,"generation":0,"state":"closed"},"bytes_to_backend":0,"bytes_to_client":0,"configured_weight":1,"dial_failures":0,"disabled":false,"draining":false,"health":"up","max_connections":0,"probe_failures":0,"role":"backup","source":"file","usable":true,"weight":1}` +
		`],"listeners":[],"name":"web","protocol":"tcp","serving":"primary"}]}`
	if string(raw) != want {
		t.Fatalf("GET /api/v1/pools:\n got %s\nwant %s", raw, want)
	}
}

// The pool's serving set follows its primary: the backup serves while the
// primary is disabled, nothing does once both are.
func TestPoolSaysWhichSetServes(t *testing.T) {
	srv, _ := newTestServer(t)
	for _, step := range []struct{ path, serving string }{
		{"127.0.0.1:9001/disable", "backup"},
		{"%5B::1%5D:9001/disable", "none"},
		{"127.0.0.1:9001/enable", "primary"},
	} {
		if code, _ := do(t, "POST", srv.URL+"/api/v1/pools/web/backends/"+step.path, nil); code != 200 {
			t.Fatalf("POST %s: status %d", step.path, code)
		}
		if _, v := do(t, "GET", srv.URL+"/api/v1/pools/web", nil); v["serving"] != step.serving {
			t.Errorf("after %s: serving %v, want %s", step.path, v["serving"], step.serving)
		}
	}
}

func TestDisableEnable(t *testing.T) {
	srv, p := newTestServer(t)
	// [::1]:9001 path-escaped, as docs/contracts.md shows.
	url := srv.URL + "/api/v1/pools/web/backends/%5B::1%5D:9001/"
	for _, round := range []struct {
		action   string
		disabled bool
	}{{"disable", true}, {"disable", true}, {"enable", false}, {"enable", false}} {
		code, v := do(t, "POST", url+round.action, nil)
		if code != 200 || v["addr"] != "[::1]:9001" || v["disabled"] != round.disabled || v["usable"] == round.disabled {
			t.Fatalf("%s: %d %v", round.action, code, v)
		}
		b, _ := p.Backend("[::1]:9001")
		if b.Breaker().Disabled != round.disabled {
			t.Fatalf("%s did not reach the breaker store", round.action)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	srv, _ := newTestServer(t)
	tests := []struct {
		name, method, path string
		hdr                map[string]string
		code               int
		msg                string
	}{
		{"unknown pool", "POST", "/api/v1/pools/nope/backends/127.0.0.1:9001/disable", nil, 404, `unknown pool "nope"`},
		{"unknown backend", "POST", "/api/v1/pools/web/backends/127.0.0.1:1/disable", nil, 404, `unknown backend "127.0.0.1:1"`},
		{"unknown action", "POST", "/api/v1/pools/web/backends/127.0.0.1:9001/flush", nil, 404, "unknown action"},
		{"drain with a bad timeout", "POST", "/api/v1/pools/web/backends/127.0.0.1:9001/drain?timeout=soon", nil, 400, "not a duration"},
		{"weight without a value", "POST", "/api/v1/pools/web/backends/127.0.0.1:9001/weight", nil, 400, "not an integer weight"},
		{"weight out of range", "POST", "/api/v1/pools/web/backends/127.0.0.1:9001/weight?value=257", nil, 400, "out of range"},
		{"unknown route", "GET", "/api/v1/whatever", nil, 404, "no such route"},
		{"GET on disable", "GET", "/api/v1/pools/web/backends/127.0.0.1:9001/disable", nil, 405, "use POST"},
		{"POST on pools", "POST", "/api/v1/pools", nil, 405, "use GET, HEAD"},
		{"browser Origin", "POST", "/api/v1/pools/web/backends/127.0.0.1:9001/disable", map[string]string{"Origin": "http://evil.example"}, 403, "Origin"},
		{"DNS rebinding Host", "GET", "/api/v1/pools", map[string]string{"Host": "evil.example:9090"}, 403, "Host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, v := do(t, tc.method, srv.URL+tc.path, tc.hdr)
			if code != tc.code || !strings.Contains(v["error"].(string), tc.msg) {
				t.Fatalf("%d %v, want %d with %q", code, v, tc.code, tc.msg)
			}
		})
	}
	for _, host := range []string{"localhost:9090", "127.0.0.1:9090", "[::1]:9090"} {
		if code, _ := do(t, "GET", srv.URL+"/api/v1/pools", map[string]string{"Host": host}); code != 200 {
			t.Fatalf("Host %s refused (%d)", host, code)
		}
	}
}

func TestMetricsScrapedByHostName(t *testing.T) {
	srv, _ := newTestServer(t)
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	req.Host = "lb1.example:9090" // how Prometheus scrapes a named target
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics with a host name: %d, want 200", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/debug/pprof/", nil)
	req.Host = "evil.example:9090"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("/debug/pprof/ with a foreign host name: %d, want 403", resp.StatusCode)
	}
}

func TestMetricsNames(t *testing.T) {
	srv, _ := newTestServer(t)
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		`l4lb_backend_up{backend="127.0.0.1:9001",pool="web"} 1`,
		`l4lb_breaker_open{backend="127.0.0.1:9001",pool="web"} 0`,
		`l4lb_breaker_generation{backend="127.0.0.1:9001",pool="web"} 0`,
		`l4lb_health_up{backend="127.0.0.1:9001",pool="web"} 1`,
		`l4lb_backend_disabled{backend="127.0.0.1:9001",pool="web"} 0`,
		`l4lb_backend_dials_total{backend="127.0.0.1:9001",kind="probe",pool="web",result="failure"} 0`,
		`l4lb_backend_dials_total{backend="127.0.0.1:9001",kind="health",pool="web",result="success"} 0`,
		`l4lb_breaker_trips_total{backend="127.0.0.1:9001",pool="web"} 0`,
		`l4lb_breaker_probe_failures_total{backend="127.0.0.1:9001",pool="web"} 0`,
		`l4lb_breaker_stale_results_total{backend="127.0.0.1:9001",pool="web"} 0`,
		`l4lb_connections_active{backend="127.0.0.1:9001",pool="web"} 0`,
		`l4lb_bytes_total{backend="127.0.0.1:9001",direction="to_backend",pool="web"} 0`,
		`l4lb_bytes_total{backend="[::1]:9001",direction="to_client",pool="web"} 0`,
		`l4lb_client_connections_max 100`,
	} {
		if !strings.Contains(string(body), "\n"+series+"\n") {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

func TestProfilesServed(t *testing.T) {
	srv, _ := newTestServer(t)
	resp, err := http.Get(srv.URL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("pprof: %d %.80q", resp.StatusCode, body)
	}
}

// Every read answers HEAD as it answers GET, without a body: HTTP asks it
// of GET resources, and monitoring checks probe with it. A write does not.
func TestReadsAnswerHead(t *testing.T) {
	srv, _ := newTestServer(t)
	for _, path := range []string{"/api/v1/pools", "/api/v1/pools/web", "/metrics"} {
		resp, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d body bytes, want 200 and none", path, resp.StatusCode, len(body))
		}
	}
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/api/v1/reload", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("HEAD on reload: %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	code, v := do(t, "PUT", srv.URL+"/api/v1/pools", nil)
	if code != http.StatusMethodNotAllowed || !strings.Contains(v["error"].(string), "use GET, HEAD") {
		t.Errorf("PUT on pools: %d %v, want 405 naming GET, HEAD", code, v)
	}
}
