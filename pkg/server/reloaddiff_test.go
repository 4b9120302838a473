package server

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

// A reload names the listeners, pools and backends it added, removed and
// changed; moving a table to another line or reordering backends is no
// change.
func TestDiffConfigsNamesWhatChanged(t *testing.T) {
	parse := func(text string) *config.Config {
		t.Helper()
		cfg, err := config.Parse("t.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	old := parse(`
[[listener]]
name = "web"
bind = "127.0.0.1:18080"
pool = "web"
[[listener]]
name = "gone"
bind = "127.0.0.1:18081"
pool = "web"
[pool.web]
[[pool.web.backend]]
addr = "127.0.0.1:9001"
[[pool.web.backend]]
addr = "127.0.0.1:9002"
weight = 2
[[pool.web.backend]]
addr = "127.0.0.1:9003"
`)
	cfg := parse(`
# a comment moves every line down

[[listener]]
name = "web"
bind = "127.0.0.1:18090"
pool = "web"
[[listener]]
name = "api"
bind = "127.0.0.1:18082"
pool = "api"
[pool.web]
retries = 3
[[pool.web.backend]]
addr = "127.0.0.1:9003"
backup = true
[[pool.web.backend]]
addr = "127.0.0.1:9002"
weight = 5
[[pool.web.backend]]
addr = "127.0.0.1:9004"
[pool.api]
[[pool.api.backend]]
addr = "127.0.0.1:9101"
`)
	c := DiffConfigs(old, cfg)
	for _, tc := range []struct {
		what      string
		got, want []string
	}{
		{"listeners added", c.ListenersAdded, []string{"api"}},
		{"listeners removed", c.ListenersRemoved, []string{"gone"}},
		{"listeners changed", c.ListenersChanged, []string{"web"}},
		{"pools added", c.PoolsAdded, []string{"api"}},
		{"pools removed", c.PoolsRemoved, nil},
		{"pools changed", c.PoolsChanged, []string{"web"}},
		{"backends added", c.BackendsAdded, []string{"api/127.0.0.1:9101", "web/127.0.0.1:9004"}},
		{"backends removed", c.BackendsRemoved, []string{"web/127.0.0.1:9001"}},
		{"backends changed", c.BackendsChanged, []string{"web/127.0.0.1:9002", "web/127.0.0.1:9003"}}, // a weight, a role
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	if c := DiffConfigs(old, old); !c.None() {
		t.Fatalf("a configuration against itself: %+v, want no change", c)
	}

	// As the log line and the API's JSON say it.
	var line strings.Builder
	slog.New(slog.NewTextHandler(&line, nil)).Info("configuration reloaded", c.LogAttr())
	for _, want := range []string{"changes.listeners_added=[api]", `changes.backends_changed="[web/127.0.0.1:9002 web/127.0.0.1:9003]"`} {
		if !strings.Contains(line.String(), want) {
			t.Errorf("log line %q lacks %s", line.String(), want)
		}
	}
	if strings.Contains(line.String(), "pools_removed") {
		t.Errorf("log line names a change that did not happen: %q", line.String())
	}
	doc, _ := json.Marshal(ReloadResult{Changes: c})
	if !strings.Contains(string(doc), `"backends_removed":["web/127.0.0.1:9001"]`) {
		t.Errorf("the API's JSON: %s", doc)
	}
}

// A listener's routes and a pool's discovery table that only moved to
// other lines are no change; a route that changed is the listener's.
func TestDiffConfigsIgnoresMovedRoutesAndDiscovery(t *testing.T) {
	text := func(top, sni string) *config.Config {
		t.Helper()
		cfg, err := config.Parse("t.toml", []byte(top+`
[[listener]]
name = "edge"
bind = "127.0.0.1:18443"
pool = "fallback"
[[listener.route]]
sni = [`+sni+`]
pool = "api"
[pool.fallback]
[[pool.fallback.backend]]
addr = "127.0.0.1:9001"
[pool.api]
[pool.api.discovery]
dns = "api.service.test:80"
resolvers = ["127.0.0.1:53"]
[[pool.api.backend]]
addr = "127.0.0.1:9002"
`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	old := text("", `"api.example.com"`)
	if c := DiffConfigs(old, text("# moved\n\n\n", `"api.example.com"`)); !c.None() {
		t.Errorf("moved tables: %+v, want no change", c)
	}
	c := DiffConfigs(old, text("", `"api.example.com", "api2.example.com"`))
	if !slices.Equal(c.ListenersChanged, []string{"edge"}) || len(c.PoolsChanged) != 0 {
		t.Errorf("a route's names changed: %+v, want listener edge changed and nothing else", c)
	}
	if old.Listeners[0].Routes[0].Line == 0 || old.Pools["api"].Discovery.Line == 0 {
		t.Error("the comparison zeroed the configuration's own lines")
	}
}

// DiffConfigs leaves out every Line of a listener and a pool by hand: a
// new table with a line of its own inside them would count as a change
// whenever an edit moves it. This lists where Lines are, so that adding
// one fails here until DiffConfigs leaves it out too.
func TestDiffConfigsKnowsEveryLineField(t *testing.T) {
	var found []string
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice:
			walk(path+"[]", typ.Elem())
		case reflect.Map:
			walk(path+"{}", typ.Elem())
		case reflect.Struct:
			for f := range typ.Fields() {
				if f.Name == "Line" {
					found = append(found, path+".Line")
					continue
				}
				if f.IsExported() {
					walk(path+"."+f.Name, f.Type)
				}
			}
		}
	}
	walk("Listener", reflect.TypeFor[config.Listener]())
	walk("Pool", reflect.TypeFor[config.Pool]())
	want := []string{"Listener.Line", "Listener.Routes[].Line", "Pool.Backends[].Line", "Pool.Discovery[].Line", "Pool.Line"}
	slices.Sort(found)
	if !slices.Equal(found, want) {
		t.Fatalf("Line fields %q, want %q: leave a new one out in DiffConfigs, then add it here", found, want)
	}
}
