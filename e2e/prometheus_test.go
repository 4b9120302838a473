package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// The shipped rules on a real Prometheus (Debian's prometheus package)
// scraping a running l4lb every second: every rule loads and evaluates
// without error on l4lb's real series; the breaker alert is quiet while
// the backends are fine, stays quiet at the trip, and fires once the
// recovery probe of a backend whose port is closed fails, naming its pool
// and backend.
func TestShippedProbeAlertFiresOnARealPrometheus(t *testing.T) {
	testnet.CheckLeaks(t)
	live := testnet.StartBackend(t, "live", "")
	dead := testnet.FreeAddr(t) // nothing listens: dials are refused
	// failures = 1: the first refused client dial trips; the probe comes
	// one cooldown later. 5s leaves Prometheus, scraping every second,
	// time to see the trip alone before the probe fails. (The pool's
	// tables come before WriteConfig's [pool.p], as TOML allows.)
	cfg, listen, admin := e2eutil.WriteConfig(t, "", []string{live.Addr, dead},
		"[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"5s\"\nmax_cooldown = \"5s\"")
	p := startL4LB(t, "", nil, "-config", cfg)
	waitServing(t, p, listen)
	waitAccepting(t, "l4lb admin", p, admin)

	prom := startPrometheus(t, admin)
	deadSel := fmt.Sprintf(`{pool="p",backend=%q}`, dead)

	// Before any failure: two scrapes of the probe counter, then an
	// evaluation of the alerts after them, and no alert.
	testnet.Eventually(t, "Prometheus to hold two scrapes of l4lb", func() bool {
		return len(prom.query(t, "count_over_time(l4lb_breaker_probe_failures_total"+deadSel+"[1m]) >= 2")) == 1
	})
	prom.waitEvaluation(t, time.Now())
	if a := prom.alerts(t, "L4LBBreakerProbeFailed"); len(a) != 0 {
		t.Fatalf("the probe alert is %s before any failure: %+v", a[0].State, a)
	}
	if got := prom.query(t, `instance_pool:l4lb_backend_up:sum{pool="p"}`); len(got) != 1 || got[0].Value[1] != "2" {
		t.Fatalf("recorded usable backends of p before any failure: %+v, want 2", got)
	}

	// Clients until one's dial to the dead backend trips it (the dialer
	// retries on the live one, so the clients are served).
	tripped := func() bool {
		return e2eutil.Metric(t, admin, `l4lb_breaker_open{backend="`+dead+`",pool="p"}`) == 1
	}
	for i := 0; i < 20 && !tripped(); i++ {
		if c, err := net.DialTimeout("tcp", listen, 5*time.Second); err == nil {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			c.Read(make([]byte, 64)) // the live backend's tag line, or the end
			c.Close()
		}
	}
	if !tripped() {
		t.Fatal("20 clients did not trip the dead backend's breaker")
	}

	// Until the alert fires and Prometheus holds the failed probe.
	var firing alert
	testnet.WaitUntil(60*time.Second, func() bool {
		firing = alert{}
		for _, a := range prom.alerts(t, "L4LBBreakerProbeFailed") {
			if a.State == "firing" {
				firing = a
			}
		}
		return firing.State == "firing" && len(prom.query(t, "l4lb_breaker_probe_failures_total"+deadSel+" >= 1")) == 1
	})
	if firing.State != "firing" {
		t.Fatalf("the probe alert did not fire within 60s of the trip; alerts: %+v\nl4lb log:\n%s", prom.alerts(t, ""), p.stderr.String())
	}
	want := map[string]string{"alertname": "L4LBBreakerProbeFailed", "pool": "p", "backend": dead,
		"severity": "warning", "job": "l4lb", "instance": admin}
	for k, v := range want {
		if firing.Labels[k] != v {
			t.Errorf("the firing alert's label %s = %q, want %q (labels %v)", k, firing.Labels[k], v, firing.Labels)
		}
	}
	if s := firing.Annotations["summary"]; !strings.Contains(s, dead) || !strings.Contains(s, "pool p") {
		t.Errorf("the alert's summary does not name the backend and pool: %q", s)
	}

	// Prometheus saw the trip alone before the failed probe, and the
	// alert became active only at or after the probe's first scrape.
	openAt := prom.firstSampleAt(t, "l4lb_breaker_open"+deadSel, 1)
	failedAt := prom.firstSampleAt(t, "l4lb_breaker_probe_failures_total"+deadSel, 1)
	if !openAt.Before(failedAt) {
		t.Fatalf("Prometheus first scraped the breaker open at %v and the failed probe at %v: it never saw the trip alone", openAt, failedAt)
	}
	t.Logf("Prometheus scraped the trip at %v, the failed probe %v later; the alert active %v after the probe's scrape",
		openAt.Format(time.StampMilli), failedAt.Sub(openAt), firing.ActiveAt.Sub(failedAt))
	if firing.ActiveAt.Before(failedAt) {
		t.Fatalf("the probe alert became active at %v, before Prometheus scraped a failed probe (%v); the trip was scraped at %v", firing.ActiveAt, failedAt, openAt)
	}
	for _, a := range prom.alerts(t, "L4LBBreakerProbeFailed") {
		if a.Labels["backend"] != dead {
			t.Errorf("the probe alert is %s for %s, whose probes never failed", a.State, a.Labels["backend"])
		}
	}
}

// promServer is a Prometheus started by a test, with the shipped rules.
type promServer struct {
	addr   string
	client *http.Client
}

// startPrometheus runs Debian's prometheus, scraping target's /metrics
// (job "l4lb") and evaluating dist/prometheus's rule files, as they are,
// every second, its storage in a directory of the test's. It is killed
// and its directory removed when the test ends.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin := testnet.NeedTool(t, "prometheus", "prometheus")
	rules, err := filepath.Abs("../dist/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	text := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: l4lb
    static_configs:
      - targets: [%q]
`, filepath.Join(rules, "*.rules.yml"), target)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &promServer{addr: testnet.FreeAddr(t), client: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}}
	p := startProc(t, "prometheus", exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+s.addr), nil)
	testnet.Eventually(t, "prometheus to be ready on "+s.addr, func() bool {
		if done, err := exited(p); done {
			t.Fatalf("prometheus exited early: %v\n%s", err, p.stderr.String())
		}
		resp, err := s.client.Get("http://" + s.addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// get decodes the data of the API's answer to path with query q into out.
func (s *promServer) get(t *testing.T, path string, q url.Values, out any) {
	t.Helper()
	resp, err := s.client.Get("http://" + s.addr + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("prometheus %s: %v", path, err)
	}
	if body.Status != "success" {
		t.Fatalf("prometheus %s?%s: %s %s", path, q.Encode(), body.Status, body.Error)
	}
	if err := json.Unmarshal(body.Data, out); err != nil {
		t.Fatalf("prometheus %s: %v", path, err)
	}
}

// sample is one series of an instant query: labels and [time, "value"].
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query now.
func (s *promServer) query(t *testing.T, expr string) []sample {
	t.Helper()
	var data struct {
		Result []sample `json:"result"`
	}
	s.get(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	return data.Result
}

// firstSampleAt is when Prometheus first scraped series (one) at value
// min or more, from the last 5 minutes of raw samples.
func (s *promServer) firstSampleAt(t *testing.T, series string, min float64) time.Time {
	t.Helper()
	var data struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	s.get(t, "/api/v1/query", url.Values{"query": {series + "[5m]"}}, &data)
	if len(data.Result) != 1 {
		t.Fatalf("%s: %d series in Prometheus, want 1", series, len(data.Result))
	}
	for _, v := range data.Result[0].Values {
		ts, _ := v[0].(float64)
		str, _ := v[1].(string)
		if f, err := strconv.ParseFloat(str, 64); err == nil && f >= min {
			return time.UnixMilli(int64(ts*1000 + 0.5))
		}
	}
	t.Fatalf("%s never reached %v in Prometheus: %v", series, min, data.Result[0].Values)
	return time.Time{}
}

// alert is one of /api/v1/alerts.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
}

// alerts are the active (pending or firing) alerts named name ("": all).
func (s *promServer) alerts(t *testing.T, name string) []alert {
	t.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	s.get(t, "/api/v1/alerts", nil, &data)
	return slices.DeleteFunc(data.Alerts, func(a alert) bool { return name != "" && a.Labels["alertname"] != name })
}

// waitEvaluation waits until every rule group has been evaluated after
// since, and checks that every rule loaded and evaluates without error.
func (s *promServer) waitEvaluation(t *testing.T, since time.Time) {
	t.Helper()
	type rule struct {
		Name      string `json:"name"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
	}
	var data struct {
		Groups []struct {
			Name           string    `json:"name"`
			Rules          []rule    `json:"rules"`
			LastEvaluation time.Time `json:"lastEvaluation"`
		} `json:"groups"`
	}
	testnet.Eventually(t, "Prometheus to evaluate the rules", func() bool {
		s.get(t, "/api/v1/rules", nil, &data)
		for _, g := range data.Groups {
			if !g.LastEvaluation.After(since) {
				return false
			}
		}
		return len(data.Groups) > 0
	})
	var names []string
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Name)
			if r.Health != "ok" {
				t.Errorf("rule %s of group %s: health %q, error %q", r.Name, g.Name, r.Health, r.LastError)
			}
		}
	}
	if !slices.Contains(names, "L4LBBreakerProbeFailed") || !slices.Contains(names, "instance_pool:l4lb_backend_up:sum") {
		t.Fatalf("Prometheus did not load the shipped rules; it has %v", names)
	}
}
