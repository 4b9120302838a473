package handoff

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

func handoffConfig(t *testing.T, web string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(`[admin]
listen = ""
[[listener]]
name = "l"
bind = "127.0.0.1:8080"
pool = "web"
[pool.web]
`+web+`
[pool.dns]
[[pool.dns.backend]]
addr = "127.0.0.1:9053"
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newPools builds cfg's pools, as the process that serves them does.
func newPools(t *testing.T, cfg *config.Config, deps pool.Deps) []*pool.Pool {
	t.Helper()
	var pools []*pool.Pool
	for _, name := range cfg.PoolNames {
		p, err := pool.New(cfg.Pools[name], deps)
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, p)
	}
	return pools
}

// The state document carries breaker state and health from the running
// pools to a fresh store and pool set: written, read back, restored, it
// gives the same state, with cooldowns counted from the restore.
func TestHandoffStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	cfg := handoffConfig(t, `[[pool.web.backend]]
addr = "127.0.0.1:9001"
id = "one"
[[pool.web.backend]]
addr = "127.0.0.1:9002"
`)
	store := breaker.NewMemoryStore(nil)
	pools := newPools(t, cfg, pool.Deps{Store: store})
	store.Trip(ctx, "web/one", 0, 30*time.Second, 30*time.Second)
	store.Disable(ctx, "web/127.0.0.1:9002")
	// An operator drained one backend and weighted the other.
	web := pools[slices.IndexFunc(pools, func(p *pool.Pool) bool { return p.Name == "web" })]
	if err := web.Drain(ctx, web.Backends()[0], time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := web.SetWeight(ctx, web.Backends()[1], 7); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	if err := Capture(store, pools, "test").Encode(&buf); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	for _, want := range []string{`"format":"l4lb-upgrade-state"`, `"version":4`, `"drain_deadline":`, `"key":"web/one"`, `"cooldown":"30s"`, `"backend":"one"`, `"addr":"127.0.0.1:9001"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %s:\n%s", want, doc)
		}
	}
	st, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if st.FromPID != os.Getpid() || st.FromVersion != "test" {
		t.Fatalf("from %d %q", st.FromPID, st.FromVersion)
	}
	fresh := breaker.NewMemoryStore(nil)
	if err := st.Restore(fresh); err != nil {
		t.Fatal(err)
	}
	one, _ := fresh.Read(ctx, "web/one")
	if !one.Open || one.Generation != 1 || one.Cooldown != 30*time.Second || one.CooldownLeft <= 25*time.Second {
		t.Fatalf("web/one restored as %+v, want open at generation 1 with most of 30s left", one)
	}
	if two, _ := fresh.Read(ctx, "web/127.0.0.1:9002"); !two.Disabled || two.Open {
		t.Fatalf("web/127.0.0.1:9002 restored as %+v, want disabled", two)
	}
	// Every backend starts as the old process saw it: up (health on, no
	// check run yet), at the same address.
	want := map[string]map[string]bool{
		"web": {"one": true, "127.0.0.1:9002": true},
		"dns": {"127.0.0.1:9053": true},
	}
	if got := st.InitialHealth(cfg); !reflect.DeepEqual(got, want) {
		t.Fatalf("initial health %v, want %v", got, want)
	}
	// The drain and the weight go on in pools built from it.
	rt := st.RuntimeByKey()
	if w := rt["web/127.0.0.1:9002"].Weight; len(rt) != 2 || !rt["web/one"].Drained || w == nil || *w != 7 {
		t.Fatalf("runtime %+v, want web/one drained and web/127.0.0.1:9002 at weight 7", rt)
	}
	next := newPools(t, cfg, pool.Deps{Store: fresh, Runtime: rt})
	nweb := next[slices.IndexFunc(next, func(p *pool.Pool) bool { return p.Name == "web" })]
	if !nweb.Backends()[0].Draining() {
		t.Error("a drained backend came back in rotation after the upgrade")
	}
	// Its drain's times, so its deadline, hold in the new process.
	was, _ := web.Backends()[0].DrainState()
	if d, _ := nweb.Backends()[0].DrainState(); !d.Deadline.Equal(was.Deadline) || !d.Since.Equal(was.Since) {
		t.Errorf("drain %v to %v after the upgrade, want the old process's %v to %v", d.Since, d.Deadline, was.Since, was.Deadline)
	}
	if b := nweb.Backends()[1]; b.Weight() != 7 {
		t.Errorf("weight %d after the upgrade, want the operator's 7", b.Weight())
	}
}

// A version 1 document (an older build's: no drains or weights) is still
// read; its runtime is nil, so the state file's apply.
func TestHandoffReadsVersion1(t *testing.T) {
	st, err := Decode(strings.NewReader(`{"format":"l4lb-upgrade-state","version":1,"from_pid":7,"from_version":"v0","breaker":[{"key":"web/a","generation":3}],"health":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if st.RuntimeByKey() != nil || len(st.Breaker) != 1 || st.Breaker[0].Generation != 3 {
		t.Fatalf("version 1 read as %+v", st)
	}
}

// Health carries by pool and identity, and only at the same address: a
// backend whose identity moved starts down (checked before use), one the
// old process did not have is absent (up, as at any start), and the same
// identity in another pool is that pool's own.
func TestHandoffInitialHealth(t *testing.T) {
	st := &State{Health: []HealthEntry{
		{Pool: "web", Backend: "one", Addr: "127.0.0.1:9001", Up: false},
		{Pool: "web", Backend: "two", Addr: "127.0.0.1:9002", Up: true},
		{Pool: "web", Backend: "moved", Addr: "127.0.0.1:9003", Up: true},
		{Pool: "dns", Backend: "127.0.0.1:9053", Addr: "127.0.0.1:9053", Up: false},
		{Pool: "gone", Backend: "x", Addr: "127.0.0.1:1", Up: true},
	}}
	cfg := handoffConfig(t, `[[pool.web.backend]]
addr = "127.0.0.1:9001"
id = "one"
[[pool.web.backend]]
addr = "127.0.0.1:9002"
id = "two"
[[pool.web.backend]]
addr = "127.0.0.1:9013"
id = "moved"
[[pool.web.backend]]
addr = "127.0.0.1:9004"
id = "new"
`)
	want := map[string]map[string]bool{
		"web": {"one": false, "two": true, "moved": false},
		"dns": {"127.0.0.1:9053": false},
	}
	if got := st.InitialHealth(cfg); !reflect.DeepEqual(got, want) {
		t.Fatalf("initial health %v, want %v", got, want)
	}
	var none *State
	if none.InitialHealth(cfg) != nil {
		t.Fatal("no state, yet health")
	}
}

// A document this build cannot read is refused with an error that says
// what is wrong with it.
func TestHandoffStateRefusesBadDocuments(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"empty", "", "empty"},
		{"not JSON", "READY 12\n", "not a JSON document"},
		{"another format", `{"format":"tableflip","version":1}`, `format "tableflip"`},
		{"a newer version", `{"format":"l4lb-upgrade-state","version":5,"whatever":[1]}`, "version 5, and this l4lb reads versions 1 to 4"},
		{"drain times in version 3", `{"format":"l4lb-upgrade-state","version":3,"runtime":[{"pool":"p","backend":"a","configured_weight":1,"drained":true,"drain_deadline":"2026-01-01T00:00:00Z"}]}`, "version 3 has no drain times"},
		{"members in version 2", `{"format":"l4lb-upgrade-state","version":2,"members":{"added":{"p":[{"addr":"127.0.0.1:1","weight":1}]}}}`, "version 2 has no members"},
		{"runtime in version 1", `{"format":"l4lb-upgrade-state","version":1,"runtime":[]}`, "version 1 has no runtime"},
		{"runtime twice", `{"format":"l4lb-upgrade-state","version":2,"runtime":[{"pool":"p","backend":"a","configured_weight":1,"drained":true},{"pool":"p","backend":"a","configured_weight":1}]}`, "runtime of p/a twice"},
		{"runtime without a backend", `{"format":"l4lb-upgrade-state","version":2,"runtime":[{"pool":"p","configured_weight":1}]}`, "without pool or backend"},
		{"an older version", `{"format":"l4lb-upgrade-state","version":0}`, "version 0"},
		{"an unknown key", `{"format":"l4lb-upgrade-state","version":1,"sessions":[]}`, `unknown field "sessions"`},
		{"a wrong type", `{"format":"l4lb-upgrade-state","version":1,"breaker":{"key":"x"}}`, "cannot unmarshal"},
		{"an open breaker at generation 0", `{"format":"l4lb-upgrade-state","version":1,"breaker":[{"key":"web/a","generation":0,"open":true,"cooldown":"1s","cooldown_left":"1s"}]}`, "open at generation 0"},
		{"a bad duration", `{"format":"l4lb-upgrade-state","version":1,"breaker":[{"key":"web/a","generation":1,"open":true,"cooldown":"soon"}]}`, "breaker web/a: cooldown"},
		{"health twice", `{"format":"l4lb-upgrade-state","version":1,"health":[{"pool":"p","backend":"a","addr":"x","up":true},{"pool":"p","backend":"a","addr":"x","up":false}]}`, "health of p/a twice"},
		{"health without a pool", `{"format":"l4lb-upgrade-state","version":1,"health":[{"backend":"a","addr":"x","up":true}]}`, "without pool or backend"},
		{"two documents", `{"format":"l4lb-upgrade-state","version":1} {}`, "not a JSON document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "upgrade state: ") {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
