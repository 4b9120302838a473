package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A pool's DNS discovery is in the pools JSON, in the list and on the
// pool's own page, as the Sources' Discovery gives it; a pool it gives
// nothing for has no "discovery" key at all.
func TestPoolsJSONShowsDiscovery(t *testing.T) {
	testnet.CheckLeaks(t)
	p := testPool(t)
	since := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	var asked []string
	src := Sources{Pools: []*pool.Pool{p}, Discovery: func(name string) *DiscoveryJSON {
		asked = append(asked, name)
		return &DiscoveryJSON{Type: "srv", Name: "_web._tcp.example.test", Backends: 3, LastSuccess: &since,
			Failing: true, FailingSince: &since, LastError: "i/o timeout"}
	}}
	srv := httptest.NewServer(Handler(src, "", nil))
	t.Cleanup(srv.Close)

	code, list := do(t, http.MethodGet, srv.URL+"/api/v1/pools", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/pools: %d", code)
	}
	d, _ := list["pools"].([]any)[0].(map[string]any)["discovery"].(map[string]any)
	if d["type"] != "srv" || d["name"] != "_web._tcp.example.test" || d["backends"] != 3.0 || d["failing"] != true ||
		d["failing_since"] != "2026-12-01T20:00:00Z" || d["last_error"] != "i/o timeout" || d["last_success"] == nil {
		t.Fatalf("the list's discovery is %v", d)
	}
	if _, ok := d["empty_since"]; ok {
		t.Fatalf("empty_since present without an empty answer: %v", d)
	}
	_, one := do(t, http.MethodGet, srv.URL+"/api/v1/pools/web", nil)
	if d, _ := one["discovery"].(map[string]any); d["name"] != "_web._tcp.example.test" {
		t.Fatalf("the pool's page shows discovery %v", one["discovery"])
	}
	if len(asked) != 2 || asked[0] != "web" || asked[1] != "web" {
		t.Fatalf("Discovery asked for %v; want the pool by name, once per view", asked)
	}

	plain := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}, Discovery: func(string) *DiscoveryJSON { return nil }}, "", nil))
	t.Cleanup(plain.Close)
	_, one = do(t, http.MethodGet, plain.URL+"/api/v1/pools/web", nil)
	if _, ok := one["discovery"]; ok {
		t.Fatalf("a pool without discovery has %v", one["discovery"])
	}
}
