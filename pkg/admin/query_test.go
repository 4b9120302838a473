package admin

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A drain or weight request whose query string does not decode, names a
// parameter the action does not take, gives a parameter no value or gives
// it twice must be refused (400), not run with the default (or one of the
// two) standing in: r.URL.Query drops a pair it cannot decode, so
// "timeout=%zz", "timeout=0s;", a misspelled "timout=0s" or an empty
// "timeout=" used to drain for the default 30s with a 202.
func TestMalformedQueryIsRefused(t *testing.T) {
	srv, p := newTestServer(t)
	base := srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9001/"
	for _, tc := range []struct{ name, path, msg string }{
		{"bad escape in the timeout", "drain?timeout=%zz", "query"},
		{"semicolon after the timeout", "drain?timeout=0s;", "query"},
		{"bad escape beside the weight", "weight?value=2&x=%zz", "query"},
		{"misspelled timeout", "drain?timout=0s", "query"},
		{"weight's parameter on drain", "drain?value=0s", "query"},
		{"unknown parameter beside the weight", "weight?value=2&force=1", "query"},
		{"an empty timeout", "drain?timeout=", "timeout= has no value"},
		{"an empty weight", "weight?value=", "value= has no value"},
		{"the weight twice", "weight?value=1&value=2", "value given 2 times"},
		{"the timeout twice", "drain?timeout=1s&timeout=1s", "timeout given 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, v := do(t, "POST", base+tc.path, nil)
			if code != 400 || !strings.Contains(v["error"].(string), tc.msg) {
				t.Fatalf("%d %v, want 400 saying %q", code, v, tc.msg)
			}
			b, _ := p.Backend("127.0.0.1:9001")
			if b.Draining() || b.Weight() != 3 {
				t.Fatalf("refused request acted: draining %v, weight %d", b.Draining(), b.Weight())
			}
		})
	}
}

// A drained backend is fine but takes no new connection: the API says
// usable false and draining true with the drain's deadline, and
// l4lb_backend_up is 0, so a dashboard does not count it in rotation.
func TestDrainedBackendIsNotUsable(t *testing.T) {
	srv, p := newTestServer(t)
	code, v := do(t, "POST", srv.URL+"/api/v1/pools/web/backends/127.0.0.1:9001/drain?timeout=1h", nil)
	if code != 202 {
		t.Fatalf("drain: %d %v", code, v)
	}
	if v["usable"] != false || v["draining"] != true {
		t.Fatalf("a draining backend: usable %v, draining %v; want false, true", v["usable"], v["draining"])
	}
	drain, _ := v["drain"].(map[string]any)
	if left, _ := drain["deadline_left_seconds"].(float64); left <= 3500 || drain["deadline"] == nil {
		t.Fatalf("the drain's deadline: %v", drain)
	}
	if up := scrape(t, srv.URL, `l4lb_backend_up{backend="127.0.0.1:9001",pool="web"}`); up != "0" {
		t.Fatalf("l4lb_backend_up of a draining backend: %s, want 0", up)
	}
	b, _ := p.Backend("127.0.0.1:9001")
	if !b.Usable() {
		t.Fatal("the drained backend itself is no longer usable (health and breaker say it is)")
	}
	if code, v := do(t, "POST", srv.URL+"/api/v1/pools/web/backends/127.0.0.1:9001/enable", nil); code != 200 || v["usable"] != true || v["draining"] != false {
		t.Fatalf("enable after the drain: %d usable %v draining %v", code, v["usable"], v["draining"])
	}
}

// scrape returns the value of series in /metrics ("" when absent).
func scrape(t *testing.T, base, series string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
