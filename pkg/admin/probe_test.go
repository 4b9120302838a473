package admin

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// refusedAddr is a loopback address nothing listens on (a port no other
// test process is handed either).
func refusedAddr(t *testing.T) string { return testnet.FreeAddr(t) }

// runningPool is pool "p" over one refusing backend whose breaker trips on
// the first failed dial and stays open long, run until the test ends.
func runningPool(t *testing.T) (*pool.Pool, *pool.Backend) {
	t.Helper()
	return runningPoolOn(t, breaker.NewMemoryStore(nil))
}

// runningPoolOn is runningPool with its breakers on store.
func runningPoolOn(t *testing.T, store breaker.Store) (*pool.Pool, *pool.Backend) {
	t.Helper()
	testnet.CheckLeaks(t)
	p := runPoolOn(t, store, fmt.Sprintf(`
[[listener]]
name = "l"
bind = %q
pool = "p"
[pool.p]
retries = 0
[[pool.p.backend]]
addr = %q
[pool.p.health]
enabled = false
[pool.p.breaker]
failures = 1
cooldown = "10m"
max_cooldown = "20m"
`, testnet.FreeAddr(t), refusedAddr(t)))
	return p, p.Backends()[0]
}

// runPool builds pool "p" of the config text and runs it (health checks,
// breakers) until the test ends.
func runPool(t *testing.T, text string) *pool.Pool {
	t.Helper()
	return runPoolOn(t, breaker.NewMemoryStore(nil), text)
}

// runPoolOn is runPool with its breakers on store.
func runPoolOn(t *testing.T, store breaker.Store, text string) *pool.Pool {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(cfg.Pools["p"], pool.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return p
}

// POST .../probe asks the open breaker for its recovery probe now (not at
// the end of a ten-minute cooldown): 202 with the backend's state.
func TestProbeRoute(t *testing.T) {
	p, b := runningPool(t)
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}}, "", nil))
	t.Cleanup(srv.Close)
	url := srv.URL + "/api/v1/pools/p/backends/" + b.Addr + "/probe"

	if code, v := do(t, "POST", url, nil); code != 409 {
		t.Fatalf("probe of a closed breaker: %d %v, want 409", code, v)
	}
	// One failed client dial trips it (failures = 1): the pool's own dial
	// rules, as the event loop applies them after a refused connect.
	p.EndDial(p.BeginDial(b, false), dialer.Failure)
	if st := b.Breaker(); !st.Open || st.Generation != 1 {
		t.Fatalf("after a refused dial: %+v, want open at generation 1", st)
	}

	code, v := do(t, "POST", url, nil)
	br, _ := v["breaker"].(map[string]any)
	if code != 202 || v["addr"] != b.Addr || br["state"] != "open" {
		t.Fatalf("probe: %d %v, want 202 with the backend's open state", code, v)
	}
	// The probe ran (and, the backend still refusing, re-opened: rule 4).
	testnet.Eventually(t, "the requested probe to run", func() bool {
		_, failed := b.Dials(pool.DialProbe)
		return failed == 1 && b.Breaker().Generation == 2
	})
	if left := b.Breaker().CooldownLeft; left < 10*time.Minute {
		t.Fatalf("cooldown left %v after a failed probe, want it doubled from 10m", left)
	}

	if code, v := do(t, "POST", srv.URL+"/api/v1/pools/p/backends/"+b.Addr+"/disable", nil); code != 200 {
		t.Fatalf("disable: %d %v", code, v)
	}
	if code, v := do(t, "POST", url, nil); code != 409 {
		t.Fatalf("probe of a disabled backend: %d %v, want 409", code, v)
	}
	for path, want := range map[string]int{
		"/api/v1/pools/nope/backends/" + b.Addr + "/probe": 404,
		"/api/v1/pools/p/backends/127.0.0.1:1/probe":       404,
	} {
		if code, v := do(t, "POST", srv.URL+path, nil); code != want {
			t.Errorf("POST %s: %d %v, want %d", path, code, v, want)
		}
	}
	if code, v := do(t, "GET", url, nil); code != 405 {
		t.Errorf("GET on probe: %d %v, want 405", code, v)
	}
}
