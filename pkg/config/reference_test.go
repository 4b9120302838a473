package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const referencePath = "../../config.toml"

// designKeys is every key of "Configuration shape" in DESIGN.md and of the
// issues since (connect_budget, early_reset_window, token_file and the
// admin max_connections come from issue 8; the UDP keys from issue 11; the
// access log's from issue 12; the traffic policy's from issue 14), with
// its default ("" where the reference writes another value, or none). A key
// that applies to one protocol only is written where it applies: listener[0]
// and pool NAME are TCP, listener[1] and pool UDPNAME are UDP. The backend
// is the first one.
var designKeys = []struct{ key, value string }{
	{"global.shutdown_timeout", `"30s"`},
	{"global.max_connections", "0"},
	{"global.event_loops", "0"},
	{"global.pipe_size", "1048576"},
	{"global.busy_poll", `"0s"`},
	{"global.wake_coalesce", `"20us"`},
	{"global.state_file", `""`},
	{"admin.listen", `"127.0.0.1:9090"`},
	{"admin.token_file", `""`},
	{"admin.max_connections", "64"},
	{"log.level", `"info"`},
	{"log.format", `"text"`},
	{"log.access", `"off"`},
	{"log.access_file", `""`},
	{"listener[0].name", ""},
	{"listener[0].bind", ""},
	{"listener[0].protocol", `"tcp"`},
	{"listener[0].pool", ""},
	{"listener[0].backlog", "0"},
	{"listener[0].allow", "[]"},
	{"listener[0].deny", "[]"},
	{"listener[0].accept_proxy", "false"},
	{"listener[0].max_connections_per_source", "0"},
	{"listener[0].rate_per_source", "0.0"},
	{"listener[0].keepalive", `"off"`},
	{"listener[1].protocol", ""},
	{"listener[1].session_timeout", `"60s"`},
	{"listener[1].max_sessions", "4096"},
	{"listener[1].responses", "0"},
	{"listener[1].requests", "0"},
	{"listener[1].receive_buffer", "0"},
	{"listener[1].allow", "[]"},
	{"listener[1].deny", "[]"},
	{"pool.NAME.algorithm", `"round-robin"`},
	{"pool.NAME.hash_key", `"source-ip"`},
	{"pool.NAME.connect_timeout", `"2s"`},
	{"pool.NAME.connect_budget", `"5s"`},
	{"pool.NAME.idle_timeout", `"10m"`},
	{"pool.UDPNAME.reply_timeout", `"2s"`},
	{"pool.NAME.retries", "2"},
	{"pool.NAME.slow_start", `"0s"`},
	{"pool.NAME.hash_balance_factor", "0.0"},
	{"pool.NAME.ring_vnodes", "160"},
	{"pool.NAME.maglev_table_size", "65537"},
	{"pool.NAME.proxy_protocol", `"off"`},
	{"pool.UDPNAME.proxy_protocol", `"off"`},
	{"pool.NAME.queue_timeout", `"0s"`},
	{"pool.NAME.keepalive", `"off"`},
	{"pool.NAME.source", "[]"},
	{"pool.NAME.backend[0].addr", ""},
	{"pool.NAME.backend[0].weight", "1"},
	{"pool.NAME.backend[0].id", `""`},
	{"pool.NAME.backend[0].max_connections", "0"},
	{"pool.NAME.health.enabled", "true"},
	{"pool.NAME.health.type", `"connect"`},
	{"pool.NAME.health.port", "0"},
	{"pool.UDPNAME.health.type", ""},
	{"pool.UDPNAME.health.send", ""},
	{"pool.UDPNAME.health.expect", ""},
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
	{"pool.UDPNAME.breaker.count_no_reply", "false"},
}

// clusterKeys are the keys of [cluster] (issue 13), with their defaults
// ("" where there is none). Unlike designKeys, config.toml does not write
// them yet: the keys of the redis store are an error beside the default
// memory one, so the reference could only describe them in comments.
var clusterKeys = []struct{ key, value string }{
	{"cluster.store", `"memory"`},
	{"cluster.redis_url", ""},
	{"cluster.password_file", `""`},
	{"cluster.tls_ca_file", `""`},
	{"cluster.tls_cert_file", `""`},
	{"cluster.tls_key_file", `""`},
	{"cluster.tls_server_name", `""`},
	{"cluster.sentinel_master", `""`},
	{"cluster.sentinel_addrs", "[]"},
	{"cluster.key_prefix", `"l4lb:"`},
	{"cluster.sync_interval", `"2s"`},
	{"cluster.timeout", `"250ms"`},
	{"cluster.instance", `""`},
}

// commentedKeys are keys config.toml can only describe, not write: each is
// the other form of a key it writes, and the two exclude each other.
var commentedKeys = []string{"send_hex", "expect_hex"}

// dependentKeys (issue 14) mean something only beside another key's
// non-default value (accept_proxy = true, rate_per_source above 0, a
// per-source limit, keepalive on), and are errors without it, even at their defaults.
// config.toml, which writes those other keys at their defaults, describes
// each in a comment "# KEY = VALUE" inside the table it belongs to, with
// its default ("" where it has none).
var dependentKeys = []struct{ key, value string }{
	{"listener[0].trusted_proxies", ""}, // required with accept_proxy = true
	{"listener[0].proxy_timeout", `"3s"`},
	{"listener[0].burst_per_source", "0"},
	{"listener[0].source_ipv4_prefix", "32"},
	{"listener[0].source_ipv6_prefix", "64"},
	{"listener[0].keepalive_interval", `"0s"`},
	{"listener[0].keepalive_count", "0"},
	{"pool.NAME.keepalive_interval", `"0s"`},
	{"pool.NAME.keepalive_count", "0"},
}

// designKey is k with the pool placeholders replaced by tcp and udp.
func designKey(k, tcp, udp string) string {
	return strings.Replace(strings.Replace(k, "UDPNAME", udp, 1), "NAME", tcp, 1)
}

// TestReferenceConfigIsValid checks the shipped config.toml parses and is
// the demo: listener echo on 127.0.0.1:8080 (TCP) in front of three echo
// backends, listener udp-echo on 127.0.0.1:8081 (UDP) in front of three UDP
// echo backends with a send-expect check, round robin, admin on
// 127.0.0.1:9090; and that every key it writes holds its default.
func TestReferenceConfigIsValid(t *testing.T) {
	cfg, err := Load(referencePath)
	if err != nil {
		t.Fatalf("config.toml does not pass: %v", err)
	}
	if len(cfg.Listeners) != 2 {
		t.Fatalf("listeners = %d, want 2", len(cfg.Listeners))
	}
	def := DefaultListener()
	wantTCP := def
	wantTCP.Name, wantTCP.Bind, wantTCP.Pool, wantTCP.Line = "echo", "127.0.0.1:8080", "echo", cfg.Listeners[0].Line
	if l := cfg.Listeners[0]; !reflect.DeepEqual(l, wantTCP) {
		t.Errorf("listener[0] = %+v, want echo on 127.0.0.1:8080 to pool echo, tcp, with the defaults %+v", l, wantTCP)
	}
	wantUDP := def
	wantUDP.Name, wantUDP.Bind, wantUDP.Protocol, wantUDP.Pool, wantUDP.Line = "udp-echo", "127.0.0.1:8081", ProtocolUDP, "udp-echo", cfg.Listeners[1].Line
	if l := cfg.Listeners[1]; !reflect.DeepEqual(l, wantUDP) {
		t.Errorf("listener[1] = %+v, want udp-echo on 127.0.0.1:8081 to pool udp-echo, udp, with the defaults %+v", l, wantUDP)
	}
	if cfg.Admin.Listen != "127.0.0.1:9090" {
		t.Errorf("admin listen = %q, want 127.0.0.1:9090", cfg.Admin.Listen)
	}
	// The reference writes defaults, so it must decode exactly as the
	// defaults do.
	if cfg.Global != DefaultGlobal() || cfg.Admin != DefaultAdmin() || cfg.Log != DefaultLog() || !reflect.DeepEqual(cfg.Cluster, DefaultCluster()) {
		t.Errorf("config.toml does not hold the defaults: %+v %+v %+v %+v", cfg.Global, cfg.Admin, cfg.Log, cfg.Cluster)
	}
	tests := []struct {
		pool, protocol, firstPort string
		health                    func(*Health)
	}{
		{"echo", ProtocolTCP, "9001", func(*Health) {}},
		{"udp-echo", ProtocolUDP, "9101", func(h *Health) {
			h.Type, h.Send, h.Expect = HealthSendExpect, []byte("ping"), []byte("ping")
		}},
	}
	for _, tt := range tests {
		p := cfg.Pools[tt.pool]
		if p == nil {
			t.Errorf("no pool %s", tt.pool)
			continue
		}
		var addrs []string
		for _, b := range p.Backends {
			addrs = append(addrs, b.Addr)
		}
		first, _ := strconv.Atoi(tt.firstPort)
		if want := fmt.Sprintf("127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d", first, first+1, first+2); strings.Join(addrs, " ") != want {
			t.Errorf("pool %s backends = %v, want %s", tt.pool, addrs, want)
		}
		want := DefaultPool(tt.pool)
		want.Protocol, want.Backends, want.Line = tt.protocol, p.Backends, p.Line
		tt.health(&want.Health)
		for _, b := range p.Backends {
			if b.Weight != DefaultBackend().Weight || b.ID != "" || b.MaxConnections != 0 {
				t.Errorf("pool %s backend %s: weight %d id %q max_connections %d, want the defaults", tt.pool, b.Addr, b.Weight, b.ID, b.MaxConnections)
			}
		}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("config.toml pool %s does not hold the defaults:\n got %+v\nwant %+v", tt.pool, *p, *want)
		}
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
		key := designKey(k.key, "echo", "udp-echo")
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
	for _, k := range commentedKeys {
		if !regexp.MustCompile(`(?m)^#.*\b` + k + `\b`).Match(src) {
			t.Errorf("config.toml does not describe %s in a comment", k)
		}
	}
	for _, k := range dependentKeys {
		key := designKey(k.key, "echo", "udp-echo")
		dot := strings.LastIndexByte(key, '.')
		table, name := key[:dot], key[dot+1:]
		// The table's lines: from its first key to the next table header.
		first := 0
		for k, n := range pos.lines {
			if strings.HasPrefix(k, table+".") && (first == 0 || n < first) {
				first = n
			}
		}
		if first == 0 {
			t.Errorf("config.toml has no %s", table)
			continue
		}
		comment := regexp.MustCompile(`^#\s*` + name + ` = ` + regexp.QuoteMeta(k.value))
		found := false
		for _, line := range lines[first-1:] {
			if strings.HasPrefix(line, "[") {
				break
			}
			if comment.MatchString(line) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("config.toml does not describe %s in a comment \"# %s = %s\" in %s", key, name, k.value, table)
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
busy_poll = "0s"
wake_coalesce = "20us"
state_file = ""
[admin]
listen = "127.0.0.1:9090"
token_file = ""
max_connections = 64
[log]
level = "info"
format = "text"
access = "off"
access_file = ""
[[listener]]
name = "web"
bind = "127.0.0.1:8080"
protocol = "tcp"
pool = "web"
backlog = 0
allow = []
deny = []
accept_proxy = false
max_connections_per_source = 0
rate_per_source = 0.0
keepalive = "off"
[[listener]]
name = "dns"
bind = "127.0.0.1:8080"
protocol = "udp"
pool = "dns"
session_timeout = "60s"
max_sessions = 4096
responses = 0
requests = 0
receive_buffer = 0
allow = []
deny = []
[pool.dns]
reply_timeout = "2s"
proxy_protocol = "off"
[[pool.dns.backend]]
addr = "127.0.0.1:9053"
[pool.dns.health]
type = "send-expect"
send = "ping"
expect = ""
[pool.dns.breaker]
count_no_reply = false
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
proxy_protocol = "off"
queue_timeout = "0s"
keepalive = "off"
source = []
[[pool.web.backend]]
addr = "127.0.0.1:9001"
weight = 1
id = ""
max_connections = 0
[pool.web.health]
enabled = true
type = "connect"
port = 0
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
	// The other forms of send and expect, in a TCP pool's check.
	hexForms := validBase + "[pool.web.health]\ntype = \"send-expect\"\nsend_hex = \"00\"\nexpect_hex = \"\"\n"
	// [cluster] at its defaults, with the redis store (the memory store
	// refuses the redis keys).
	cluster := validBase + "[cluster]\nstore = \"redis\"\nredis_url = \"redis://127.0.0.1:6379\"\n"
	for _, k := range clusterKeys[2:] {
		cluster += strings.TrimPrefix(k.key, "cluster.") + " = " + k.value + "\n"
	}
	redisCfg := mustParse(t, cluster).Cluster
	wantCluster := DefaultCluster()
	wantCluster.Store, wantCluster.RedisURL, wantCluster.SentinelAddrs = StoreRedis, "redis://127.0.0.1:6379", []string{}
	if !reflect.DeepEqual(redisCfg, wantCluster) {
		t.Errorf("[cluster] written at its defaults decodes as %+v, want %+v", redisCfg, wantCluster)
	}
	// The keys that need another's non-default value: accept_proxy = true,
	// a rate, keepalive on; written at their defaults.
	dependents := `[[listener]]
name = "web"
bind = "127.0.0.1:8080"
pool = "web"
accept_proxy = true
trusted_proxies = ["10.0.0.0/8"]
proxy_timeout = "3s"
rate_per_source = 1.0
burst_per_source = 0
source_ipv4_prefix = 32
source_ipv6_prefix = 64
keepalive = "60s"
keepalive_interval = "0s"
keepalive_count = 0
[pool.web]
keepalive = "60s"
keepalive_interval = "0s"
keepalive_count = 0
[[pool.web.backend]]
addr = "127.0.0.1:9001"
`
	dep := mustParse(t, dependents)
	if l, p := dep.Listeners[0], dep.Pools["web"]; l.ProxyTimeout != DefaultProxyTimeout || l.SourceBurst() != 1 || l.KeepaliveInterval != 0 || l.KeepaliveCount != 0 ||
		p.KeepaliveInterval != 0 || p.KeepaliveCount != 0 {
		t.Errorf("the dependent keys at their defaults decode as %+v, %+v", l, *p)
	}
	for _, src := range []string{src, hexForms, cluster, dependents} {
		mustParse(t, src)
		for k := range locate([]byte(src)).lines {
			accepted[k] = true
		}
	}
	for _, k := range designKeys {
		if key := designKey(k.key, "web", "dns"); !accepted[key] {
			t.Errorf("design key %s is not in this test's source", key)
		}
	}
	for _, k := range commentedKeys {
		if key := "pool.web.health." + k; !accepted[key] {
			t.Errorf("design key %s is not in this test's source", key)
		}
	}
	for _, k := range clusterKeys {
		if !accepted[k.key] {
			t.Errorf("cluster key %s is not in this test's source", k.key)
		}
	}
	for _, k := range dependentKeys {
		if key := designKey(k.key, "web", "dns"); !accepted[key] {
			t.Errorf("dependent key %s is not in this test's source", key)
		}
	}
}
