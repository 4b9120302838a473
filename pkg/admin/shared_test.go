package admin

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// fakeFleet is a FleetRuntime that applies what it is asked as the
// fleet's, at rising versions, as cmd/l4lb's does after its store took
// it; down makes it fail as a store out of reach does.
type fakeFleet struct {
	mu      sync.Mutex
	version uint64
	calls   []string
	down    bool
}

var errFakeDown = errors.New("the cluster store is unreachable")

func (f *fakeFleet) next(call string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if f.down {
		return 0, errFakeDown
	}
	f.version++
	return f.version, nil
}

func (f *fakeFleet) called() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, " ")
}

func (f *fakeFleet) Drain(_ context.Context, p *pool.Pool, b *pool.Backend, timeout time.Duration) error {
	v, err := f.next("drain")
	if err != nil {
		return err
	}
	return p.ApplyFleet(b, pool.Fleet{Drain: &pool.FleetDrain{Version: v, Drained: true, Timeout: timeout, Left: timeout}, Here: true})
}

func (f *fakeFleet) Undrain(_ context.Context, p *pool.Pool, b *pool.Backend) error {
	v, err := f.next("undrain")
	if err != nil {
		return err
	}
	return p.ApplyFleet(b, pool.Fleet{Drain: &pool.FleetDrain{Version: v}, Here: true})
}

func (f *fakeFleet) SetWeight(_ context.Context, p *pool.Pool, b *pool.Backend, w int) error {
	v, err := f.next("weight")
	if err != nil {
		return err
	}
	return p.ApplyFleet(b, pool.Fleet{Weight: &pool.FleetWeight{Version: v, Weight: &w, Configured: b.ConfiguredWeight()}, Here: true})
}

func newFleetServer(t *testing.T, f FleetRuntime) (*httptest.Server, *pool.Pool) {
	t.Helper()
	testnet.CheckLeaks(t)
	p := testPool(t)
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}, MaxConnections: 100, FleetRuntime: f}, "", nil))
	t.Cleanup(srv.Close)
	return srv, p
}

func drainScope(v map[string]any) any {
	d, _ := v["drain"].(map[string]any)
	return d["scope"]
}

// Without a fleet every drain and weight is this instance's, and says so;
// scope=fleet is refused rather than quietly made local.
func TestScopeWithoutAFleet(t *testing.T) {
	srv, p := newTestServer(t)
	base := srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9001/"
	if code, v := do(t, "POST", base+"drain?timeout=1h", nil); code != 202 || drainScope(v) != "local" {
		t.Fatalf("drain: %d scope %v, want 202 local", code, drainScope(v))
	}
	if code, v := do(t, "POST", base+"weight?value=5&scope=local", nil); code != 200 || v["weight_scope"] != "local" {
		t.Fatalf("weight: %d %v", code, v)
	}
	for _, q := range []string{"drain?scope=fleet", "weight?value=2&scope=fleet", "drain?scope=everywhere", "weight?value=2&scope="} {
		if code, v := do(t, "POST", base+q, nil); code != 400 || !strings.Contains(v["error"].(string), "scope") {
			t.Fatalf("%s: %d %v, want 400 naming scope", q, code, v)
		}
	}
	if b, _ := p.Backend("127.0.0.1:9001"); b.Weight() != 5 {
		t.Fatalf("a refused scope changed the weight to %d", b.Weight())
	}
	if code, v := do(t, "POST", base+"weight?value=3", nil); code != 200 || v["weight_scope"] != nil {
		t.Fatalf("weight back to the file's: %d weight_scope %v, want none", code, v["weight_scope"])
	}
}

// With a fleet, drain and weight are the fleet's unless scope=local, and
// enable ends the fleet's drain too.
func TestScopeWithAFleet(t *testing.T) {
	f := &fakeFleet{}
	srv, p := newFleetServer(t, f)
	base := srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9001/"
	b, _ := p.Backend("127.0.0.1:9001")
	if code, v := do(t, "POST", base+"drain?timeout=1h", nil); code != 202 || drainScope(v) != "fleet" || f.called() != "drain" {
		t.Fatalf("drain: %d scope %v, fleet calls %q", code, drainScope(v), f.called())
	}
	if code, v := do(t, "POST", base+"enable", nil); code != 200 || v["draining"] != false || f.called() != "drain undrain" {
		t.Fatalf("enable: %d %v, fleet calls %q", code, v, f.called())
	}
	if code, v := do(t, "POST", base+"drain?timeout=1h&scope=local", nil); code != 202 || drainScope(v) != "local" || f.called() != "drain undrain" {
		t.Fatalf("local drain: %d scope %v, fleet calls %q", code, drainScope(v), f.called())
	}
	if code, v := do(t, "POST", base+"weight?value=7&scope=fleet", nil); code != 200 || v["weight"] != 7.0 || v["weight_scope"] != "fleet" {
		t.Fatalf("fleet weight: %d %v", code, v)
	}
	if code, v := do(t, "POST", base+"weight?value=9&scope=local", nil); code != 200 || v["weight"] != 9.0 || v["weight_scope"] != "local" {
		t.Fatalf("local weight: %d %v", code, v)
	}
	if code, v := do(t, "POST", base+"weight?value=300", nil); code != 400 || f.called() != "drain undrain weight" {
		t.Fatalf("weight out of range: %d %v, fleet calls %q (none may be made)", code, v, f.called())
	}

	// The store out of reach: the fleet's change fails, nothing changes
	// here, and scope=local still works.
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	if code, v := do(t, "POST", base+"weight?value=2", nil); code != 503 || !strings.Contains(v["error"].(string), "unreachable") {
		t.Fatalf("fleet weight while down: %d %v, want 503", code, v)
	}
	if b.Weight() != 9 {
		t.Fatalf("a failed fleet weight changed the weight to %d", b.Weight())
	}
	if code, _ := do(t, "POST", base+"weight?value=4&scope=local", nil); code != 200 || b.Weight() != 4 {
		t.Fatalf("local weight while down: %d, weight %d", code, b.Weight())
	}
}

// enable?scope=local in a fleet ends this instance's own drain and
// nothing of the fleet's: a fleet's drain and a disable hold, no call
// reaches the store, and it works while the store is out of reach.
func TestEnableLocalInAFleet(t *testing.T) {
	f := &fakeFleet{}
	srv, p := newFleetServer(t, f)
	base := srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9001/"
	b, _ := p.Backend("127.0.0.1:9001")
	if code, _ := do(t, "POST", base+"drain?timeout=1h&scope=local", nil); code != 202 {
		t.Fatalf("local drain: %d", code)
	}
	if code, v := do(t, "POST", base+"enable?scope=local", nil); code != 200 || v["draining"] != false || f.called() != "" {
		t.Fatalf("local enable of a local drain: %d %v, fleet calls %q (want none)", code, v, f.called())
	}

	// Another instance drains the fleet; this one drains too, on its own.
	if err := p.ApplyFleet(b, pool.Fleet{Drain: &pool.FleetDrain{Version: 1, Drained: true, Timeout: time.Hour, Left: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if code, _ := do(t, "POST", base+"drain?timeout=1h&scope=local", nil); code != 202 {
		t.Fatalf("local drain beside the fleet's: %d", code)
	}
	if code, v := do(t, "POST", base+"enable?scope=local", nil); code != 200 || v["draining"] != true || drainScope(v) != "fleet" {
		t.Fatalf("local enable beside a fleet's drain: %d %v; want the fleet's drain to hold", code, v)
	}
	if code, v := do(t, "POST", base+"disable", nil); code != 200 || v["disabled"] != true {
		t.Fatalf("disable: %d %v", code, v)
	}
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	if code, v := do(t, "POST", base+"enable?scope=local", nil); code != 200 || v["disabled"] != true || v["draining"] != true {
		t.Fatalf("local enable while the store is down: %d %v; want 200, the disable and the fleet's drain kept", code, v)
	}
	if code, _ := do(t, "POST", base+"enable", nil); code != 503 {
		t.Fatalf("fleet enable while the store is down: %d, want 503", code)
	}
	if f.called() != "undrain" {
		t.Fatalf("fleet calls %q; want only the failed fleet enable's undrain", f.called())
	}
}

// Without a fleet enable?scope=local is the whole enable (everything is
// this instance's); scope=fleet and unknown parameters are refused.
func TestEnableScopeWithoutAFleet(t *testing.T) {
	srv, _ := newTestServer(t)
	base := srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9001/"
	do(t, "POST", base+"disable", nil)
	do(t, "POST", base+"drain?timeout=1h", nil)
	if code, v := do(t, "POST", base+"enable?scope=local", nil); code != 200 || v["disabled"] != false || v["draining"] != false {
		t.Fatalf("enable?scope=local without a fleet: %d %v; want disable and drain ended", code, v)
	}
	for _, q := range []string{"enable?scope=fleet", "enable?scope=", "enable?force=1"} {
		if code, v := do(t, "POST", base+q, nil); code != 400 {
			t.Fatalf("%s: %d %v, want 400", q, code, v)
		}
	}
}
