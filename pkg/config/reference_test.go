package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

const referencePath = "../../config.toml"

// designKeys is every key of "Configuration shape" in DESIGN.md and of the
// issues since (connect_budget, early_reset_window, token_file and the
// admin max_connections come from issue 8), with its default. The pool is
// called NAME and the backend is the first one.
var designKeys = []struct{ key, value string }{
	{"global.shutdown_timeout", `"30s"`},
	{"global.max_connections", "0"},
	{"global.event_loops", "0"},
	{"global.pipe_size", "1048576"},
	{"admin.listen", `"127.0.0.1:9090"`},
	{"admin.token_file", `""`},
	{"admin.max_connections", "64"},
	{"log.level", `"info"`},
	{"log.format", `"text"`},
	{"listener[0].name", ""},
	{"listener[0].bind", ""},
	{"listener[0].protocol", `"tcp"`},
	{"listener[0].pool", ""},
	{"listener[0].backlog", "0"},
	{"pool.NAME.algorithm", `"round-robin"`},
	{"pool.NAME.hash_key", `"source-ip"`},
	{"pool.NAME.connect_timeout", `"2s"`},
	{"pool.NAME.connect_budget", `"5s"`},
	{"pool.NAME.idle_timeout", `"10m"`},
	{"pool.NAME.retries", "2"},
	{"pool.NAME.slow_start", `"0s"`},
	{"pool.NAME.hash_balance_factor", "0.0"},
	{"pool.NAME.ring_vnodes", "160"},
	{"pool.NAME.maglev_table_size", "65537"},
	{"pool.NAME.backend[0].addr", ""},
	{"pool.NAME.backend[0].weight", "1"},
	{"pool.NAME.backend[0].id", `""`},
	{"pool.NAME.health.enabled", "true"},
	{"pool.NAME.health.interval", `"2s"`},
	{"pool.NAME.health.timeout", `"1s"`},
	{"pool.NAME.health.rise", "2"},
	{"pool.NAME.health.fall", "3"},
	{"pool.NAME.breaker.failures", "3"},
	{"pool.NAME.breaker.window", `"120s"`},
	{"pool.NAME.breaker.min_ratio", "0.0"},
	{"pool.NAME.breaker.min_volume", "0"},
	{"pool.NAME.breaker.cooldown", `"30s"`},
	{"pool.NAME.breaker.max_cooldown", `"5m"`},
	{"pool.NAME.breaker.successes", "1"},
	{"pool.NAME.breaker.count_early_reset", "false"},
	{"pool.NAME.breaker.early_reset_window", `"5s"`},
}

// TestReferenceConfigIsValid checks the shipped config.toml parses and is
// the demo: one listener echo on 127.0.0.1:8080 in front of three echo
// backends, round robin, admin on 127.0.0.1:9090.
func TestReferenceConfigIsValid(t *testing.T) {
	cfg, err := Load(referencePath)
	if err != nil {
		t.Fatalf("config.toml does not pass: %v", err)
	}
	if len(cfg.Listeners) != 1 {
		t.Fatalf("listeners = %d, want 1", len(cfg.Listeners))
	}
	l := cfg.Listeners[0]
	if l.Name != "echo" || l.Bind != "127.0.0.1:8080" || l.Pool != "echo" || l.Protocol != "tcp" {
		t.Errorf("listener = %+v, want echo on 127.0.0.1:8080 to pool echo", l)
	}
	if cfg.Admin.Listen != "127.0.0.1:9090" {
		t.Errorf("admin listen = %q, want 127.0.0.1:9090", cfg.Admin.Listen)
	}
	p := cfg.Pools["echo"]
	if p == nil {
		t.Fatal("no pool echo")
	}
	if p.Algorithm != AlgorithmRoundRobin {
		t.Errorf("algorithm = %q, want round-robin", p.Algorithm)
	}
	var addrs []string
	for _, b := range p.Backends {
		addrs = append(addrs, b.Addr)
	}
	if strings.Join(addrs, " ") != "127.0.0.1:9001 127.0.0.1:9002 127.0.0.1:9003" {
		t.Errorf("backends = %v, want 127.0.0.1:9001..9003", addrs)
	}
	// The reference writes defaults, so it must decode exactly as the
	// defaults do.
	if cfg.Global != DefaultGlobal() || cfg.Admin != DefaultAdmin() || cfg.Log != DefaultLog() || !reflect.DeepEqual(p.Health, DefaultHealth()) || p.Breaker != DefaultBreaker() {
		t.Errorf("config.toml does not hold the defaults: %+v %+v %+v %+v %+v", cfg.Global, cfg.Admin, cfg.Log, p.Health, p.Breaker)
	}
	if p.ConnectTimeout != 2*time.Second || p.ConnectBudget != DefaultConnectBudget || p.IdleTimeout != 10*time.Minute || p.Retries != 2 ||
		p.SlowStart != 0 || p.HashBalanceFactor != 0 || p.RingVnodes != 160 || p.MaglevTableSize != 65537 || p.HashKey != HashKeySourceIP {
		t.Errorf("config.toml pool keys are not the defaults: %+v", *p)
	}
}

// TestReferenceConfigWritesEveryKey checks config.toml writes every key of
// the design's configuration shape, with its default, under a comment, so
// the reference cannot silently lose a key.
func TestReferenceConfigWritesEveryKey(t *testing.T) {
	src, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	pos := locate(src)
	lines := strings.Split(string(src), "\n")
	for _, k := range designKeys {
		key := strings.Replace(k.key, "NAME", "echo", 1)
		n, ok := pos.lines[key]
		if !ok {
			t.Errorf("config.toml does not write %s", key)
			continue
		}
		line := strings.TrimSpace(lines[n-1])
		if k.value != "" && !strings.HasSuffix(line, "= "+k.value) {
			t.Errorf("config.toml:%d: %q, want %s = %s (the default)", n, line, key, k.value)
		}
		if n < 2 || !strings.HasPrefix(strings.TrimSpace(lines[n-2]), "#") {
			t.Errorf("config.toml:%d: %s has no comment above it", n, key)
		}
	}
}

// TestDesignKeysAreAccepted checks that the schema accepts every key of the
// design (a key missing from the schema would be reported unknown).
func TestDesignKeysAreAccepted(t *testing.T) {
	accepted := map[string]bool{}
	src := `[global]
shutdown_timeout = "30s"
max_connections = 0
event_loops = 0
pipe_size = 1048576
[admin]
listen = "127.0.0.1:9090"
token_file = ""
max_connections = 64
[log]
level = "info"
format = "text"
[[listener]]
name = "web"
bind = "127.0.0.1:8080"
protocol = "tcp"
pool = "web"
backlog = 0
[pool.web]
algorithm = "round-robin"
hash_key = "source-ip"
connect_timeout = "2s"
connect_budget = "5s"
idle_timeout = "10m"
retries = 2
slow_start = "0s"
hash_balance_factor = 0.0
ring_vnodes = 160
maglev_table_size = 65537
[[pool.web.backend]]
addr = "127.0.0.1:9001"
weight = 1
id = ""
[pool.web.health]
enabled = true
interval = "2s"
timeout = "1s"
rise = 2
fall = 3
[pool.web.breaker]
failures = 3
window = "120s"
min_ratio = 0.0
min_volume = 0
cooldown = "30s"
max_cooldown = "5m"
successes = 1
count_early_reset = false
early_reset_window = "5s"
`
	mustParse(t, src)
	for k := range locate([]byte(src)).lines {
		accepted[k] = true
	}
	for _, k := range designKeys {
		if key := strings.Replace(k.key, "NAME", "web", 1); !accepted[key] {
			t.Errorf("design key %s is not in this test's source", key)
		}
	}
}
