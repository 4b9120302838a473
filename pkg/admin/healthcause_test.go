package admin

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The pools JSON carries the last health check's cause as
// last_check_error: here a refused connect, checked every 50ms.
func TestPoolsJSONLastCheckError(t *testing.T) {
	testnet.CheckLeaks(t)
	dead := refusedAddr(t)
	p := runPool(t, fmt.Sprintf(`
[[listener]]
name = "l"
bind = %q
pool = "p"
[pool.p]
[[pool.p.backend]]
addr = %q
[pool.p.health]
interval = "50ms"
timeout = "50ms"
fall = 1
`, testnet.FreeAddr(t), dead))
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}}, "", nil))
	t.Cleanup(srv.Close)

	backend := func(url string) map[string]any {
		code, v := do(t, "GET", url, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %v", url, code, v)
		}
		return v["pools"].([]any)[0].(map[string]any)["backends"].([]any)[0].(map[string]any)
	}
	var b map[string]any
	testnet.Eventually(t, "the refused backend to go down", func() bool {
		b = backend(srv.URL + "/api/v1/pools")
		return b["health"] == "down"
	})
	msg, _ := b["last_check_error"].(string)
	if !strings.Contains(msg, "connection refused") || !strings.Contains(msg, dead) {
		t.Fatalf("backend %v: last_check_error %q, want the refused connect to %s", b, msg, dead)
	}
	// One pool, and a backend's own JSON (an action's answer), say it too.
	code, v := do(t, "GET", srv.URL+"/api/v1/pools/p", nil)
	if one, _ := v["backends"].([]any)[0].(map[string]any)["last_check_error"].(string); code != 200 || !strings.Contains(one, "connection refused") {
		t.Fatalf("GET /api/v1/pools/p: %d %v", code, v)
	}
	code, v = do(t, "POST", srv.URL+"/api/v1/pools/p/backends/"+dead+"/weight?value=2", nil)
	if s, _ := v["last_check_error"].(string); code != 200 || !strings.Contains(s, "connection refused") {
		t.Fatalf("POST .../weight: %d %v", code, v)
	}
}
