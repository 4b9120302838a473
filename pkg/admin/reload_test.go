package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/pool"
)

func TestReloadRouteReturnsEveryErrorOrTheResult(t *testing.T) {
	p := testPool(t)
	cs := &ConfigState{}
	cs.Loaded("abc123", time.Unix(1700000000, 0))
	var fail bool
	cs.Reload = func() (any, []string) {
		if fail {
			cs.Counted(false)
			return nil, []string{"l4lb.toml:3: pool.p.retries: -1 is out of range", "l4lb.toml:9: listener[1].pool: unknown pool"}
		}
		cs.Counted(true)
		cs.Loaded("def456", time.Unix(1700000100, 0))
		return map[string]any{"result": "ok", "hash": "def456"}, nil
	}
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}, Config: cs}, "", nil))
	defer srv.Close()
	post := func() (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/api/v1/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, v
	}
	metric := func(series string) bool {
		t.Helper()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "\n"+series+"\n")
	}
	if !metric("l4lb_config_last_reload_successful 1") {
		t.Error("before any reload, l4lb_config_last_reload_successful is not 1")
	}
	fail = true
	code, body := post()
	if errs, _ := body["errors"].([]any); code != http.StatusBadRequest || len(errs) != 2 || !strings.Contains(errs[0].(string), "l4lb.toml:3") {
		t.Fatalf("failed reload: %d %v, want 400 with both errors and their lines", code, body)
	}
	if !metric("l4lb_config_last_reload_successful 0") {
		t.Error("after a failed reload, l4lb_config_last_reload_successful is not 0")
	}
	fail = false
	if code, body := post(); code != http.StatusOK || body["hash"] != "def456" {
		t.Fatalf("reload: %d %v, want 200 with the new hash", code, body)
	}
	if resp, err := http.Get(srv.URL + "/api/v1/reload"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /api/v1/reload: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		`l4lb_config_reloads_total{result="ok"} 1`,
		`l4lb_config_reloads_total{result="failed"} 1`,
		`l4lb_config_last_reload_successful 1`,
		`l4lb_config_info{hash="def456"} 1.7000001e+09`,
	} {
		if !strings.Contains(string(metrics), "\n"+series+"\n") {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// While reloads are refused (a binary upgrade is under way), the route
// answers 409 saying why, without reloading or counting; RefuseReloads
// waits for an API reload under way, and allow lets reloads through again.
func TestReloadRouteRefusedDuringUpgrade(t *testing.T) {
	log, logs := newLog()
	cs := &ConfigState{}
	entered, release := make(chan struct{}), make(chan struct{})
	var reloads atomic.Int64
	cs.Reload = func() (any, []string) {
		if reloads.Add(1) == 1 {
			close(entered)
			<-release
		}
		cs.Counted(true)
		return map[string]any{"result": "ok"}, nil
	}
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{testPool(t)}, Config: cs}, "", log))
	defer srv.Close()
	post := func() (int, string) { return postForError(srv.URL + "/api/v1/reload") }

	// A reload under way when the upgrade begins: the refusal waits for it.
	first := make(chan int, 1)
	go func() { code, _ := post(); first <- code }()
	<-entered
	refusing := make(chan func(), 1)
	go func() { refusing <- cs.RefuseReloads("a binary upgrade is under way") }()
	select {
	case <-refusing:
		t.Fatal("RefuseReloads returned while a reload was under way")
	default:
	}
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the reload under way: %d, want 200", code)
	}
	allow := <-refusing

	code, msg := post()
	if code != http.StatusConflict || msg != "reload refused: a binary upgrade is under way" {
		t.Fatalf("reload during an upgrade: %d %q, want 409 saying why", code, msg)
	}
	if n := reloads.Load(); n != 1 {
		t.Fatalf("Reload ran %d times, want only the one before the upgrade", n)
	}
	if cs.ok.Load() != 1 || cs.failed.Load() != 0 {
		t.Fatalf("reloads counted ok %d, failed %d; want the one before the upgrade only", cs.ok.Load(), cs.failed.Load())
	}
	if l := logs.lines("level=WARN", "reload refused: a binary upgrade is under way"); len(l) != 1 {
		t.Fatalf("refusal logged %d times, want once:\n%s", len(l), logs.String())
	}

	allow() // the upgrade failed
	if code, msg := post(); code != http.StatusOK {
		t.Fatalf("reload after the upgrade: %d %q, want 200", code, msg)
	}
}

// While an upgrade has taken the process's state (RefuseActions), every
// action on a backend answers 409 saying why and changes nothing: a
// disable made then would be undone in the new process. RefuseActions
// waits for an action under way; allow lets actions through again.
func TestBackendActionsRefusedDuringUpgrade(t *testing.T) {
	log, logs := newLog()
	cs := &ConfigState{}
	p := testPool(t)
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}, Config: cs}, "", log))
	defer srv.Close()
	post := func(action string) (int, string) {
		return postForError(srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9001/" + action)
	}

	// An action under way when the upgrade begins: the refusal waits.
	cs.actions.RLock()
	refusing := make(chan func(), 1)
	go func() { refusing <- cs.RefuseActions("a binary upgrade is under way") }()
	select {
	case <-refusing:
		t.Fatal("RefuseActions returned while an action was under way")
	case <-time.After(20 * time.Millisecond):
	}
	cs.actions.RUnlock()
	allow := <-refusing

	for _, action := range []string{"disable", "enable", "probe", "drain", "weight?value=3"} {
		name, _, _ := strings.Cut(action, "?")
		code, msg := post(action)
		if code != http.StatusConflict || msg != name+" refused: a binary upgrade is under way" {
			t.Errorf("%s during an upgrade: %d %q, want 409 saying why", name, code, msg)
		}
	}
	b, _ := p.Backend("127.0.0.1:9001")
	if b.Breaker().Disabled || b.Weight() != b.ConfiguredWeight() {
		t.Fatalf("a refused action changed the backend: disabled %v, weight %d", b.Breaker().Disabled, b.Weight())
	}
	if l := logs.lines("level=WARN", "disable refused: a binary upgrade is under way"); len(l) != 1 {
		t.Fatalf("refusal logged %d times, want once:\n%s", len(l), logs.String())
	}

	allow() // the upgrade failed
	if code, msg := post("disable"); code != http.StatusOK {
		t.Fatalf("disable after the upgrade: %d %q, want 200", code, msg)
	}
	if !b.Breaker().Disabled {
		t.Fatal("disable after the upgrade did not take")
	}
}

// postForError POSTs to url: the status and the JSON body's error.
func postForError(url string) (int, string) {
	resp, err := http.Post(url, "", nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var v struct {
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v.Error
}
