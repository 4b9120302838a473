package admin

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// fakeMembership records the calls the routes make and answers with err
// for the addresses it names.
type fakeMembership struct {
	mu      sync.Mutex
	added   []NewBackend
	removed []string // "addr timeout"
	err     map[string]error
	// cs, when set, holds actions around each change, as a real
	// implementation must (HoldActions).
	cs *ConfigState
}

func (f *fakeMembership) hold(change func() error) error {
	if f.cs == nil {
		return change()
	}
	return f.cs.HoldActions(change)
}

func (f *fakeMembership) AddBackend(_ context.Context, pool string, b NewBackend) error {
	return f.hold(func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if err := f.err[b.Addr]; err != nil {
			return fmt.Errorf("pool %q backend %s: %w", pool, b.Addr, err)
		}
		f.added = append(f.added, b)
		return nil
	})
}

func (f *fakeMembership) RemoveBackend(_ context.Context, pool, addr string, timeout time.Duration) error {
	return f.hold(func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if err := f.err[addr]; err != nil {
			return fmt.Errorf("pool %q backend %s: %w", pool, addr, err)
		}
		f.removed = append(f.removed, addr+" "+timeout.String())
		return nil
	})
}

// newMembershipServer serves the test pool with m (nil: none) and token.
func newMembershipServer(t *testing.T, m Membership, token string) (*httptest.Server, *ConfigState) {
	t.Helper()
	testnet.CheckLeaks(t)
	cs := &ConfigState{}
	if f, ok := m.(*fakeMembership); ok {
		f.cs = cs
	}
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{testPool(t)}, Config: cs, Membership: m}, token, nil))
	t.Cleanup(srv.Close)
	return srv, cs
}

func TestAddBackendRoute(t *testing.T) {
	m := &fakeMembership{err: map[string]error{
		"127.0.0.1:9001": ErrExists,
		"127.0.0.1:9009": ErrInvalid,
		"127.0.0.1:9010": ErrNoPool,
		"127.0.0.1:9011": fmt.Errorf("the state file is not writable"),
	}}
	srv, _ := newMembershipServer(t, m, "")
	url := srv.URL + "/api/v1/pools/web/backends"
	for _, tc := range []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"an empty body", url, "", 400, "the body is empty"},
		{"not JSON", url, "addr=1", 400, "not JSON"},
		{"two values", url, `{"addr":"127.0.0.1:9002"} {}`, 400, "more than one JSON value"},
		{"an unknown field", url, `{"addr":"127.0.0.1:9002","wieght":2}`, 400, `unknown field "wieght"`},
		{"no addr", url, `{"weight":2}`, 400, "addr is missing"},
		{"a host name", url, `{"addr":"web1.example:80"}`, 400, "not a name"},
		{"no port", url, `{"addr":"127.0.0.1"}`, 400, "not host:port"},
		{"a string weight", url, `{"addr":"127.0.0.1:9002","weight":"2"}`, 400, "weight must be a JSON integer"},
		{"a weight out of range", url, `{"addr":"127.0.0.1:9002","weight":257}`, 400, "weight 257 is out of range 0..256"},
		{"a negative weight", url, `{"addr":"127.0.0.1:9002","weight":-1}`, 400, "out of range"},
		{"an unknown pool", srv.URL + "/api/v1/pools/nope/backends", `{"addr":"127.0.0.1:9002"}`, 404, `unknown pool "nope"`},
		{"an address the pool has", url, `{"addr":"127.0.0.1:9001"}`, 409, "already in the pool"},
		{"what the pool refuses", url, `{"addr":"127.0.0.1:9009"}`, 400, "invalid backend"},
		{"a pool the membership does not know", url, `{"addr":"127.0.0.1:9010"}`, 404, "no such pool"},
		{"a failure", url, `{"addr":"127.0.0.1:9011"}`, 503, "add failed: pool \"web\" backend 127.0.0.1:9011: the state file is not writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, v := send(t, "POST", tc.path, tc.body, nil)
			if code != tc.code || !strings.Contains(fmt.Sprint(v["error"]), tc.msg) {
				t.Fatalf("%d %v, want %d with %q", code, v, tc.code, tc.msg)
			}
		})
	}
	if len(m.added) != 0 {
		t.Fatalf("refused requests reached the membership: %v", m.added)
	}
	code, v := send(t, "POST", url, `{"addr":"[::1]:9002","weight":0,"id":"b2"}`, nil)
	if code != 201 || v["name"] != "web" || len(v["backends"].([]any)) != 2 {
		t.Fatalf("add: %d %v, want 201 with the pool", code, v)
	}
	if code, _ := send(t, "POST", url, `{"addr":"127.0.0.1:9003"}`, nil); code != 201 {
		t.Fatalf("add without weight: %d", code)
	}
	want := []NewBackend{{Addr: "[::1]:9002", Weight: 0, ID: "b2"}, {Addr: "127.0.0.1:9003", Weight: 1}}
	if fmt.Sprint(m.added) != fmt.Sprint(want) {
		t.Fatalf("the membership got %v, want %v (weight 0 kept, 1 by default)", m.added, want)
	}
	if code, v := send(t, "GET", url, "", nil); code != 405 || !strings.Contains(v["error"].(string), "use POST") {
		t.Fatalf("GET on the backends: %d %v", code, v)
	}
}

func TestRemoveBackendRoute(t *testing.T) {
	m := &fakeMembership{err: map[string]error{
		"127.0.0.1:9001": ErrNotRemovable,
		"127.0.0.1:9009": ErrNoBackend,
	}}
	srv, _ := newMembershipServer(t, m, "")
	base := srv.URL + "/api/v1/pools/web/backends/"
	for _, tc := range []struct {
		name, path string
		code       int
		msg        string
	}{
		{"a file's backend", base + "127.0.0.1:9001", 409, "remove refused: pool \"web\" backend 127.0.0.1:9001: not removable"},
		{"an unknown backend", base + "127.0.0.1:9009", 404, "no such backend"},
		{"an unknown pool", srv.URL + "/api/v1/pools/nope/backends/127.0.0.1:9002", 404, `unknown pool "nope"`},
		{"a bad timeout", base + "127.0.0.1:9002?timeout=soon", 400, "not a duration"},
		{"a negative timeout", base + "127.0.0.1:9002?timeout=-1s", 400, "not a duration"},
		{"an empty timeout", base + "127.0.0.1:9002?timeout=", 400, "has no value"},
		{"another parameter", base + "127.0.0.1:9002?value=3", 400, `unknown query parameter "value"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, v := send(t, "DELETE", tc.path, "", nil)
			if code != tc.code || !strings.Contains(fmt.Sprint(v["error"]), tc.msg) {
				t.Fatalf("%d %v, want %d with %q", code, v, tc.code, tc.msg)
			}
		})
	}
	for _, path := range []string{"%5B::1%5D:9002?timeout=0s", "127.0.0.1:9003"} {
		if code, v := send(t, "DELETE", base+path, "", nil); code != 202 || v["name"] != "web" {
			t.Fatalf("DELETE %s: %d %v, want 202 with the pool", path, code, v)
		}
	}
	if want := []string{"[::1]:9002 0s", "127.0.0.1:9003 30s"}; fmt.Sprint(m.removed) != fmt.Sprint(want) {
		t.Fatalf("the membership got %v, want %v (the drain's default timeout)", m.removed, want)
	}
}

// Without a Membership both routes say they cannot serve (501), before
// anything else is judged.
func TestMembershipRoutesWithoutMembership(t *testing.T) {
	srv, _ := newMembershipServer(t, nil, "")
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/api/v1/pools/web/backends", `{"addr":"127.0.0.1:9002"}`},
		{"POST", "/api/v1/pools/web/backends", `not json`},
		{"DELETE", "/api/v1/pools/web/backends/127.0.0.1:9001", ""},
	} {
		code, v := send(t, tc.method, srv.URL+tc.path, tc.body, nil)
		if code != 501 || !strings.Contains(v["error"].(string), "cannot add or remove backends") {
			t.Errorf("%s %s: %d %v, want 501 saying why", tc.method, tc.path, code, v)
		}
	}
}

// The membership routes act, so they take the token and the browser
// guard as every POST route does, and wait out an upgrade's refusal.
func TestMembershipRoutesGuarded(t *testing.T) {
	m := &fakeMembership{}
	srv, cs := newMembershipServer(t, m, "s3cret")
	add, del := srv.URL+"/api/v1/pools/web/backends", srv.URL+"/api/v1/pools/web/backends/127.0.0.1:9002"
	body := `{"addr":"127.0.0.1:9002"}`
	auth := map[string]string{"Authorization": "Bearer s3cret"}
	for _, tc := range []struct {
		name, method, url string
		hdr               map[string]string
		code              int
		msg               string
	}{
		{"add without the token", "POST", add, nil, 401, "needs the admin token"},
		{"remove without the token", "DELETE", del, nil, 401, "needs the admin token"},
		{"remove with a wrong token", "DELETE", del, map[string]string{"Authorization": "Bearer s3cre"}, 401, "the one sent is not it"},
		{"add from a browser", "POST", add, map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}, 403, "Origin"},
		{"remove from a browser", "DELETE", del, map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}, 403, "Origin"},
		{"add by DNS rebinding", "POST", add, map[string]string{"Authorization": "Bearer s3cret", "Host": "evil.example:9090"}, 403, "Host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, v := send(t, tc.method, tc.url, body, tc.hdr)
			if code != tc.code || !strings.Contains(fmt.Sprint(v["error"]), tc.msg) {
				t.Fatalf("%d %v, want %d with %q", code, v, tc.code, tc.msg)
			}
		})
	}
	if len(m.added)+len(m.removed) != 0 {
		t.Fatalf("refused requests reached the membership: %v %v", m.added, m.removed)
	}

	allow := cs.RefuseActions("an upgrade is under way")
	for _, tc := range []struct{ method, url string }{{"POST", add}, {"DELETE", del}} {
		if code, v := send(t, tc.method, tc.url, body, auth); code != 409 || !strings.Contains(v["error"].(string), "an upgrade is under way") {
			t.Fatalf("%s during an upgrade: %d %v, want 409 saying why", tc.method, code, v)
		}
	}
	allow()
	if code, _ := send(t, "POST", add, body, auth); code != 201 {
		t.Fatalf("add with the token: %d, want 201", code)
	}
	if code, _ := send(t, "DELETE", del, "", auth); code != 202 {
		t.Fatalf("remove with the token: %d, want 202", code)
	}
	if len(m.added) != 1 || len(m.removed) != 1 {
		t.Fatalf("the membership got %v and %v, want one of each", m.added, m.removed)
	}
}

// Each backend says where it came from; the file when nothing said.
func TestBackendSourceShown(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Pools["web"]
	c.Backends = append(c.Backends, config.Backend{Addr: "127.0.0.2:9001", Weight: 1, Source: config.BackendFromAPI},
		config.Backend{Addr: "127.0.0.3:9001", Weight: 1, Source: config.BackendFromDNS})
	p, err := pool.New(c, pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}}, "", nil))
	defer srv.Close()
	code, v := do(t, "GET", srv.URL+"/api/v1/pools/web", nil)
	var got []string
	for _, b := range v["backends"].([]any) {
		got = append(got, fmt.Sprint(b.(map[string]any)["addr"], "=", b.(map[string]any)["source"]))
	}
	if want := "[127.0.0.1:9001=file [::1]:9001=file 127.0.0.2:9001=api 127.0.0.3:9001=dns]"; code != 200 || fmt.Sprint(got) != want {
		t.Fatalf("sources: %d %v, want %s", code, got, want)
	}
}
