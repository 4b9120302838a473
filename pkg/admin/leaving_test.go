package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A backend that left its pool (here a reload dropped it) while a
// connection on it still finishes shows in the pool's JSON as leaving,
// and its connection in l4lb_connections_active, until it ends; before,
// both lost sight of it (the backend series summed to less than the
// connections open).
func TestLeavingBackendShowsUntilItsLastConnectionEnds(t *testing.T) {
	store := breaker.NewMemoryStore(nil)
	old := testPool(t)
	gone := old.Backends()[1] // [::1]:9001
	open := old.BeginDial(gone, false)
	cfg, err := config.Parse("t.toml", []byte(strings.Replace(testConfig, "[[pool.web.backend]]\naddr = \"[::1]:9001\"\nbackup = true\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	next, err := pool.New(cfg.Pools["web"], pool.Deps{Store: store, Previous: old})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Backends()) != 1 {
		t.Fatalf("the reloaded pool has %d backends, want 1", len(next.Backends()))
	}
	old.HandOver(next)
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{next}, MaxConnections: 100}, "", nil))
	defer srv.Close()
	metrics := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	const series = `l4lb_connections_active{backend="[::1]:9001",pool="web"} 1`

	_, v := do(t, "GET", srv.URL+"/api/v1/pools/web", nil)
	leaving, _ := v["leaving"].([]any)
	if len(leaving) != 1 || leaving[0].(map[string]any)["addr"] != "[::1]:9001" || leaving[0].(map[string]any)["active_connections"] != 1.0 {
		t.Fatalf("leaving %v, want [::1]:9001 with its one connection", v["leaving"])
	}
	if m := metrics(); !strings.Contains(m, series) {
		t.Errorf("metrics lack %s", series)
	}

	next.EndDial(open, dialer.Success)
	next.EndRelay(gone)
	_, v = do(t, "GET", srv.URL+"/api/v1/pools/web", nil)
	if _, ok := v["leaving"]; ok {
		t.Fatalf("leaving %v after its last connection ended, want the key absent", v["leaving"])
	}
	if m := metrics(); strings.Contains(m, `backend="[::1]:9001"`) {
		t.Error("a series of the gone backend stays after its last connection ended")
	}
}
