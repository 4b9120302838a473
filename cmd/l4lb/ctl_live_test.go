package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/admin"
)

// ctl runs l4lb ctl with args: its exit code, stdout and stderr.
func ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"ctl"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// getPool is pool p as the admin API at addr shows it, and the body as it
// came.
func getPool(t *testing.T, addr string) (admin.PoolJSON, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/pools/p")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var p admin.PoolJSON
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("GET pool p: %v: %q", err, body)
	}
	return p, body
}

// backendOf is the backend at addr of p.
func backendOf(t *testing.T, p admin.PoolJSON, addr string) admin.BackendJSON {
	t.Helper()
	for _, b := range p.Backends {
		if b.Addr == addr {
			return b
		}
	}
	t.Fatalf("pool p has no backend %s: %+v", addr, p.Backends)
	return admin.BackendJSON{}
}

// startCtlTarget starts l4lb in-process over two backends, its admin
// endpoint on a port of its own, adminLines added to [admin]; it returns
// the instance, its config file, the endpoint and the backends'
// addresses.
func startCtlTarget(t *testing.T, adminLines string) (in *instance, path, adminAddr string, backends []string) {
	t.Helper()
	testnet.CheckLeaks(t)
	b1, b2 := testnet.StartBackend(t, "b1", ""), testnet.StartBackend(t, "b2", "")
	written, _, adminAddr := e2eutil.WriteConfig(t, "", []string{b1.Addr, b2.Addr}, "")
	text, err := os.ReadFile(written)
	if err != nil {
		t.Fatal(err)
	}
	in, path = startFile(t, strings.Replace(string(text), "[admin]\n", "[admin]\n"+adminLines, 1))
	return in, path, adminAddr, []string{b1.Addr, b2.Addr}
}

// l4lb ctl drives a running l4lb: every action changes what the API then
// shows, a refusal exits 1 with the API's reason, and reload re-reads the
// file.
func TestCtlDrivesARunningL4lb(t *testing.T) {
	_, path, adminAddr, be := startCtlTarget(t, "")
	b1, b2 := be[0], be[1]

	code, out, errs := ctl(t, "-admin", adminAddr, "pools")
	if code != 0 || !strings.Contains(out, "POOL") || !strings.Contains(out, b1) || !strings.Contains(out, b2) || !strings.Contains(out, "file") {
		t.Fatalf("pools: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = ctl(t, "-admin", adminAddr, "-json", "pools")
	var pools admin.PoolsJSON
	if code != 0 || json.Unmarshal([]byte(out), &pools) != nil || len(pools.Pools) != 1 || len(pools.Pools[0].Backends) != 2 {
		t.Fatalf("pools -json: exit %d: %q", code, out)
	}
	// Each action, then what GET says.
	steps := []struct {
		args  []string
		said  string
		holds func(admin.BackendJSON) bool
	}{
		{[]string{"disable", "p", b1}, "disabled " + b1, func(b admin.BackendJSON) bool { return b.Disabled && !b.Usable }},
		{[]string{"enable", "p", b1}, "enabled " + b1, func(b admin.BackendJSON) bool { return !b.Disabled }},
		{[]string{"drain", "p", b1, "-timeout", "1m"}, "draining " + b1, func(b admin.BackendJSON) bool {
			return b.Draining && b.Drain != nil && b.Drain.DeadlineLeftSeconds > 30 && !b.Usable
		}},
		{[]string{"enable", "p", b1}, "enabled " + b1, func(b admin.BackendJSON) bool { return !b.Draining && b.Drain == nil }},
		{[]string{"weight", "p", b1, "5"}, "weight of " + b1 + " in pool p: 5", func(b admin.BackendJSON) bool { return b.Weight == 5 && b.ConfiguredWeight == 1 }},
	}
	for _, s := range steps {
		code, out, errs := ctl(t, append([]string{"-admin", adminAddr}, s.args...)...)
		if code != 0 || !strings.Contains(out, s.said) {
			t.Fatalf("%q: exit %d, %q %q; want 0 saying %q", s.args, code, out, errs, s.said)
		}
		if p, _ := getPool(t, adminAddr); !s.holds(backendOf(t, p, b1)) {
			t.Fatalf("after %q the API shows %+v", s.args, backendOf(t, p, b1))
		}
	}

	// Refusals: the API's reason, exit 1, nothing changed.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"disable", "p", "127.0.0.1:1"}, `unknown backend "127.0.0.1:1" in pool "p" (404 Not Found)`},
		{[]string{"pool", "nope"}, `unknown pool "nope" (404 Not Found)`},
		{[]string{"weight", "p", b2, "300"}, "out of range"},
		{[]string{"probe", "p", b2}, "409 Conflict"},
		{[]string{"remove", "p", b1}, "named by the configuration file or by DNS (from the configuration file, line"},
	} {
		code, out, errs := ctl(t, append([]string{"-admin", adminAddr}, tc.args...)...)
		if code != 1 || !strings.HasPrefix(errs, "ctl: ") || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%q: exit %d, %q %q; want 1 saying %q", tc.args, code, out, errs, tc.want)
		}
	}
	if p, _ := getPool(t, adminAddr); backendOf(t, p, b2).Weight != 1 {
		t.Fatal("a refused weight changed the backend")
	}

	// add and remove, through the running l4lb's membership: the backend
	// added is the API's, and removing it leaves the file's two.
	b4 := testnet.StartBackend(t, "b4", "")
	if code, out, errs := ctl(t, "-admin", adminAddr, "add", "p", b4.Addr, "-weight", "2"); code != 0 || !strings.Contains(out, "added "+b4.Addr) {
		t.Fatalf("add: exit %d, %q %q", code, out, errs)
	}
	if p, _ := getPool(t, adminAddr); backendOf(t, p, b4.Addr).Source != "api" || backendOf(t, p, b4.Addr).Weight != 2 {
		t.Fatalf("the added backend shows as %+v", backendOf(t, p, b4.Addr))
	}
	if code, out, errs := ctl(t, "-admin", adminAddr, "remove", "p", b4.Addr, "-timeout", "1s"); code != 0 {
		t.Fatalf("remove: exit %d, %q %q", code, out, errs)
	}
	if p, _ := getPool(t, adminAddr); len(p.Backends) != 2 {
		t.Fatalf("after the remove pool p has %d backends, want 2", len(p.Backends))
	}

	// reload, the endpoint found through -config: the file's new backend
	// is served; a broken file is refused with its line.
	b3 := testnet.StartBackend(t, "b3", "")
	text, _ := os.ReadFile(path)
	os.WriteFile(path, append(text, fmt.Sprintf("[[pool.p.backend]]\naddr = %q\n", b3.Addr)...), 0o644)
	if code, out, errs := ctl(t, "-config", path, "reload"); code != 0 || !strings.Contains(out, "reloaded (") || !strings.Contains(out, "backends added: p/"+b3.Addr) {
		t.Fatalf("reload: exit %d, %q %q", code, out, errs)
	}
	if p, _ := getPool(t, adminAddr); len(p.Backends) != 3 {
		t.Fatalf("after the reload pool p has %d backends, want 3", len(p.Backends))
	}
	os.WriteFile(path, append(text, "[[pool.p.backend]]\naddr = \"nowhere\"\n"...), 0o644)
	code, out, errs = ctl(t, "-config", path, "reload")
	if code != 1 || !strings.Contains(errs, "reload failed: the running configuration stays (400 Bad Request)") || !strings.Contains(errs, "l4lb.toml:") {
		t.Fatalf("reload of a broken file: exit %d, %q %q", code, out, errs)
	}
	if p, _ := getPool(t, adminAddr); len(p.Backends) != 3 {
		t.Fatalf("a failed reload left %d backends, want 3", len(p.Backends))
	}

	free := testnet.FreeAddr(t)
	if code, _, errs := ctl(t, "-admin", free, "pools"); code != 1 || errs != "ctl: cannot reach the admin API at "+free+": connection refused\n" {
		t.Fatalf("no endpoint: exit %d, %q", code, errs)
	}
}

// With [admin] token_file, ctl sends the file's token (or -token's) on
// what acts.
func TestCtlSendsTheToken(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("s3cret\n"), 0o600)
	_, path, adminAddr, be := startCtlTarget(t, fmt.Sprintf("token_file = %q\n", token))
	if code, _, errs := ctl(t, "-admin", adminAddr, "disable", "p", be[0]); code != 1 || !strings.Contains(errs, "needs the admin token") || !strings.Contains(errs, "give it with -token T, or -config FILE") {
		t.Fatalf("without the token: exit %d, %q", code, errs)
	}
	if code, _, errs := ctl(t, "-admin", adminAddr, "-token", "wrong", "disable", "p", be[0]); code != 1 || !strings.Contains(errs, "401") {
		t.Fatalf("with a wrong token: exit %d, %q", code, errs)
	}
	if code, _, errs := ctl(t, "-config", path, "disable", "p", be[0]); code != 0 {
		t.Fatalf("with the file's token: exit %d, %q", code, errs)
	}
	if code, _, errs := ctl(t, "-admin", adminAddr, "-token", "s3cret", "enable", "p", be[0]); code != 0 {
		t.Fatalf("with -token: exit %d, %q", code, errs)
	}
	if code, _, errs := ctl(t, "-admin", adminAddr, "pools"); code != 0 {
		t.Fatalf("a read without the token: exit %d, %q", code, errs)
	}
}

// ctlMembership stands in for the membership the process will have: it
// records what it is asked and refuses the addresses in refuse.
type ctlMembership struct {
	mu     sync.Mutex
	calls  []string
	refuse map[string]error
}

func (m *ctlMembership) AddBackend(_ context.Context, pool string, b admin.NewBackend) error {
	return m.record(b.Addr, fmt.Sprintf("add %s %s weight %d id %q", pool, b.Addr, b.Weight, b.ID))
}

func (m *ctlMembership) RemoveBackend(_ context.Context, pool, addr string, timeout time.Duration) error {
	return m.record(addr, fmt.Sprintf("remove %s %s after %s", pool, addr, timeout))
}

func (m *ctlMembership) record(addr, call string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuse[addr]; err != nil {
		return fmt.Errorf("backend %s: %w", addr, err)
	}
	m.calls = append(m.calls, call)
	return nil
}

// add and remove reach the admin server's Membership with what the
// command line says, and print the pool it answers; its refusals exit 1.
func TestCtlAddRemove(t *testing.T) {
	in, _, _, be := startCtlTarget(t, "")
	m := &ctlMembership{refuse: map[string]error{be[0]: admin.ErrNotRemovable, "127.0.0.1:9": admin.ErrExists}}
	// The running l4lb's pools behind an endpoint with a Membership.
	srv := httptest.NewServer(admin.Handler(admin.Sources{Live: in.livePools, Membership: m}, "", nil))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	code, out, errs := ctl(t, "-admin", addr, "add", "p", "127.0.0.1:7", "-weight", "2", "-id", "seven")
	if code != 0 || !strings.Contains(out, "added 127.0.0.1:7 to pool p") || !strings.Contains(out, be[1]) {
		t.Fatalf("add: exit %d, %q %q", code, out, errs)
	}
	if code, out, errs := ctl(t, "-admin", addr, "add", "p", "[::1]:7"); code != 0 {
		t.Fatalf("add without flags: exit %d, %q %q", code, out, errs)
	}
	if code, out, errs := ctl(t, "-admin", addr, "remove", "p", "127.0.0.1:7", "-timeout", "5s"); code != 0 || !strings.Contains(out, "removing 127.0.0.1:7 from pool p") {
		t.Fatalf("remove: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs := ctl(t, "-admin", addr, "remove", "p", "[::1]:7"); code != 0 {
		t.Fatalf("remove without flags: exit %d, %q", code, errs)
	}
	want := []string{`add p 127.0.0.1:7 weight 2 id "seven"`, `add p [::1]:7 weight 1 id ""`, "remove p 127.0.0.1:7 after 5s", "remove p [::1]:7 after 30s"}
	if fmt.Sprint(m.calls) != fmt.Sprint(want) {
		t.Fatalf("the membership was asked %q, want %q", m.calls, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "p", "127.0.0.1:9"}, "already in the pool (409 Conflict)"},
		{[]string{"add", "p", "web1.example:80"}, "not a name: backends found by name go in [pool.NAME.discovery]"},
		{[]string{"add", "nope", "127.0.0.1:8"}, `unknown pool "nope" (404 Not Found)`},
		{[]string{"remove", "p", be[0]}, "not removable through the API (409 Conflict)"},
	} {
		if code, _, errs := ctl(t, append([]string{"-admin", addr}, tc.args...)...); code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, %q; want 1 saying %q", tc.args, code, errs, tc.want)
		}
	}
}
