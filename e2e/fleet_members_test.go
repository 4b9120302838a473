package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A backend an operator adds through one instance's admin API is served
// by every instance of the fleet; removing it on another takes it out
// everywhere; with Redis unreachable, a change is refused (503) rather
// than made on one instance only (issue 28: runtime membership is shared
// through the fleet store).
func TestFleetSharesBackendsAddedThroughTheAPI(t *testing.T) {
	testnet.CheckLeaks(t)
	srv := testnet.StartRedis(t)
	b1 := testnet.StartBackend(t, "b1", "")
	added := testnet.StartBackend(t, "added", "")
	dir := t.TempDir()
	a := startFleetInstance(t, "", nil, dir, srv.URL(), "fleet-a", []string{b1.Addr}, "", "")
	b := startFleetInstance(t, "", nil, dir, srv.URL(), "fleet-b", []string{b1.Addr}, "", "")

	if code, body := fleetAPI(t, "POST", a.admin, "/api/v1/pools/p/backends", `{"addr":"`+added.Addr+`","weight":1}`); code != http.StatusCreated {
		t.Fatalf("add on a: %d %s", code, body)
	}
	for _, in := range []*fleetInstance{a, b} {
		testnet.Eventually(t, "instance "+in.name+" to serve the added backend", func() bool {
			src, ok := fleetBackendSource(t, in, added.Addr)
			return ok && src == "api"
		})
		testnet.Eventually(t, "instance "+in.name+"'s clients to reach it", func() bool {
			for range 4 {
				if got, err := testnet.Hello(in.listen, ""); err == nil && got == "added" {
					return true
				}
			}
			return false
		})
	}

	if code, body := fleetAPI(t, "DELETE", b.admin, "/api/v1/pools/p/backends/"+added.Addr+"?timeout=1s", ""); code != http.StatusAccepted {
		t.Fatalf("remove on b: %d %s", code, body)
	}
	for _, in := range []*fleetInstance{a, b} {
		testnet.Eventually(t, "instance "+in.name+" to drop the removed backend", func() bool {
			_, ok := fleetBackendSource(t, in, added.Addr)
			return !ok
		})
	}

	// Redis gone: the change is refused on the instance asked, and made
	// on none.
	srv.Kill()
	for _, in := range []*fleetInstance{a, b} {
		in.waitMetric(t, "l4lb_cluster_store_up", "to see Redis gone", func(v float64) bool { return v == 0 })
	}
	code, body := fleetAPI(t, "POST", a.admin, "/api/v1/pools/p/backends", `{"addr":"`+added.Addr+`"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "fleet store") {
		t.Fatalf("add with Redis down: %d %s, want 503 naming the fleet store", code, body)
	}
	if _, ok := fleetBackendSource(t, a, added.Addr); ok {
		t.Fatal("an add the fleet store refused is served on the instance asked")
	}
}

func fleetAPI(t *testing.T, method, admin, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// fleetBackendSource is the source of the backend at addr in pool p as
// the instance's API shows it.
func fleetBackendSource(t *testing.T, in *fleetInstance, addr string) (string, bool) {
	t.Helper()
	code, body := fleetAPI(t, "GET", in.admin, "/api/v1/pools/p", "")
	if code != http.StatusOK {
		t.Fatalf("GET pool p on %s: %d %s", in.name, code, body)
	}
	var p struct {
		Backends []struct {
			Addr   string `json:"addr"`
			Source string `json:"source"`
		} `json:"backends"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Backends {
		if b.Addr == addr {
			return b.Source, true
		}
	}
	return "", false
}
