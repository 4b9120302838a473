package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

// The l4lb-redis variant runs l4lb on the Redis store of its own
// redis-server, a config l4lb itself accepts.
func TestL4lbRedisConfig(t *testing.T) {
	spec := l4lbRedisSystem()
	s := placeSystem(spec, 2, 30000, false)
	s.dir = "/tmp/run/l4lb-redis"
	storesMu.Lock()
	stores[spec.name] = &storeServer{addr: loopAddr(storePort(30000, 2))}
	storesMu.Unlock()
	t.Cleanup(func() {
		storesMu.Lock()
		delete(stores, spec.name)
		storesMu.Unlock()
	})
	cfg, err := config.Parse("l4lb.toml", []byte(l4lbConfig(s.routes, 1, storeKeys(s))))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.Store != config.StoreRedis || cfg.Cluster.RedisURL != "redis://127.0.0.1:30129" || cfg.Log.Level != "warn" {
		t.Fatalf("cluster %+v, log %+v", cfg.Cluster, cfg.Log)
	}
	if len(cfg.Listeners) != len(s.routes) {
		t.Fatalf("%d listeners, want %d: [cluster] swallowed a table", len(cfg.Listeners), len(s.routes))
	}
	if !spec.optIn || !strings.Contains(spec.about, `store = "redis"`) {
		t.Fatalf("l4lb-redis: opt-in %v, about %q", spec.optIn, spec.about)
	}
	// Its store port is none of the plan's others.
	for _, r := range s.routes {
		if r.listen == loopAddr(storePort(30000, 2)) || slices.Contains(r.backends, loopAddr(storePort(30000, 2))) {
			t.Fatalf("store port taken by route %s", r.name)
		}
	}
}

func TestStoreNote(t *testing.T) {
	sr := &ScenarioResult{Scenario: "conn", Metrics: connScenario{}.metrics()}
	if _, ok := storeNote(sr); ok {
		t.Fatal("a note without both rows")
	}
	for _, v := range []struct {
		sys       string
		rate, cpu float64
	}{{"l4lb", 40000, 20}, {sysL4lbRedis, 38000, 21}} {
		for range 3 {
			sr.add(v.sys, KindSubject, map[string]float64{"conn_per_s": v.rate, "cpu_us_per_conn": v.cpu}, 0, nil)
		}
	}
	note, ok := storeNote(sr)
	if !ok || !strings.Contains(note, "(0.95x)") || !strings.Contains(note, "+1.0 µs, +5%") {
		t.Fatalf("note %q", note)
	}
}
