package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseFillsDefaults checks the defaults of docs/configuration.md,
// written out as literals so that a changed default fails here.
func TestParseFillsDefaults(t *testing.T) {
	cfg := mustParse(t, validBase)
	want := &Config{
		Global: Global{ShutdownTimeout: 30 * time.Second, MaxConnections: 0, EventLoops: 0, PipeSize: 1048576, WakeCoalesce: 20 * time.Microsecond},
		Admin:  Admin{Listen: "127.0.0.1:9090", TokenFile: "", MaxConnections: 64},
		Log:    Log{Level: "info", Format: "text", Access: "off", Process: "stderr", Syslog: "/dev/log", SyslogFormat: "rfc5424", SyslogFacility: "daemon"},
		Cluster: Cluster{Store: "memory", KeyPrefix: "l4lb:", SyncInterval: 2 * time.Second,
			Timeout: 250 * time.Millisecond, TripQuorum: 1},
		Listeners: []Listener{
			{Name: "web", Bind: "127.0.0.1:8080", Protocol: "tcp", Pool: "web", Backlog: 0, Line: 1,
				SessionTimeout: 60 * time.Second, MaxSessions: 4096, Responses: 0, Requests: 0, ProxyTimeout: 3 * time.Second, SourceIPv4Prefix: 32, SourceIPv6Prefix: 64, InspectTimeout: 5 * time.Second, OnUnrecognized: "fallback", OnTooLarge: "fallback", AccessLog: true},
		},
		Pools: map[string]*Pool{"web": {
			Name:              "web",
			Algorithm:         "round-robin",
			HashKey:           "source-ip",
			ConnectTimeout:    2 * time.Second,
			ConnectBudget:     5 * time.Second,
			IdleTimeout:       10 * time.Minute,
			Retries:           2,
			SlowStart:         0,
			HashBalanceFactor: 0,
			RingVnodes:        160,
			MaglevTableSize:   65537,
			Backends:          []Backend{{Addr: "127.0.0.1:9001", Weight: 1, ID: "", Line: 6}},
			Protocol:          "tcp",
			ReplyTimeout:      2 * time.Second,
			Health: Health{Enabled: true, Type: "connect", Port: 0, Send: nil, Expect: nil,
				Interval: 2 * time.Second, Timeout: time.Second, Rise: 2, Fall: 3},
			Breaker: Breaker{
				Failures: 3, Window: 120 * time.Second, MinRatio: 0, MinVolume: 0,
				Cooldown: 30 * time.Second, MaxCooldown: 5 * time.Minute, Successes: 1, CountEarlyReset: false,
				EarlyResetWindow: 5 * time.Second, CountNoReply: false,
			},
			Line:          5,
			ProxyProtocol: "off",
		}},
		PoolNames: []string{"web"},
	}
	want.file, want.pos = cfg.file, cfg.pos // where it came from: not the point here
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults:\n got %+v\n     %+v\nwant %+v\n     %+v", cfg, *cfg.Pools["web"], want, *want.Pools["web"])
	}
}

// TestParseReadsEveryKey sets every key to a value other than its default
// and checks each one arrives in the Config.
func TestParseReadsEveryKey(t *testing.T) {
	src := `[global]
shutdown_timeout = "0s"
max_connections = 5000
event_loops = 4
pipe_size = 65536
busy_poll = "50us"
wake_coalesce = "0s"
[admin]
listen = ""
token_file = "/etc/l4lb/admin.token"
max_connections = 8

[log]
level = "debug"
format = "json"

[[listener]]
name = "db"
bind = "0.0.0.0:5432"
protocol = "tcp"
pool = "pg"
backlog = 4096

[[listener]]
name = "db6"
bind = "[::]:5432"
pool = "pg"

[pool.pg]
algorithm = "maglev"
hash_key = "source-ip-port"
connect_timeout = "500ms"
connect_budget = "1s"
idle_timeout = "1h"
retries = 0
slow_start = "30s"
hash_balance_factor = 1.25
ring_vnodes = 40
maglev_table_size = 251

[[pool.pg.backend]]
addr = "10.0.0.1:5432"
weight = 0
id = "pg-a"

[[pool.pg.backend]]
addr = "[2001:db8::2]:5432"
weight = 256
backup = true

[pool.pg.health]
enabled = false
type = "connect"
port = 15432
interval = "10s"
timeout = "10s"
rise = 1
fall = 1

[pool.pg.breaker]
failures = 10
window = "1m"
min_ratio = 0.5
min_volume = 20
cooldown = "5s"
max_cooldown = "5s"
successes = 3
count_early_reset = true
early_reset_window = "30s"

[pool.spare]
[[pool.spare.backend]]
addr = "10.0.0.9:1"

[[listener]]
name = "dns"
bind = "0.0.0.0:5432"
protocol = "udp"
pool = "dns"
session_timeout = "5s"
max_sessions = 1000000
responses = 1
requests = 3
access_log = false
[pool.dns]
reply_timeout = "500ms"
[[pool.dns.backend]]
addr = "10.0.0.53:53"
[pool.dns.health]
type = "send-expect"
send_hex = "00ff"
expect = "ok"
[pool.dns.breaker]
count_no_reply = true

[cluster]
store = "redis"
redis_url = "rediss://l4lb@10.0.0.6:26379"
password_file = "/etc/l4lb/redis.password"
tls_ca_file = "/etc/l4lb/redis-ca.pem"
tls_cert_file = "/etc/l4lb/redis-client.pem"
tls_key_file = "/etc/l4lb/redis-client.key"
tls_server_name = "redis.internal"
sentinel_master = "l4lb"
sentinel_addrs = ["10.0.0.7:26379", "[fd00::8]:26379"]
key_prefix = "lb/prod:"
sync_interval = "5s"
timeout = "1s"
instance = "lb-1"
trip_quorum = 3
`
	cfg := mustParse(t, src)
	spare := DefaultPool("spare")
	spare.Backends = []Backend{{Addr: "10.0.0.9:1", Weight: 1, Line: 72}}
	spare.Line = 71
	dns := DefaultPool("dns")
	dns.Protocol = "udp"
	dns.ReplyTimeout = 500 * time.Millisecond
	dns.Backends = []Backend{{Addr: "10.0.0.53:53", Weight: 1, Line: 87}}
	dns.Health.Type = "send-expect"
	dns.Health.Send = []byte{0x00, 0xff}
	dns.Health.Expect = []byte("ok")
	dns.Breaker.CountNoReply = true
	dns.Line = 85
	want := &Config{
		Global: Global{ShutdownTimeout: 0, MaxConnections: 5000, EventLoops: 4, PipeSize: 65536, BusyPoll: 50 * time.Microsecond, WakeCoalesce: 0},
		Admin:  Admin{Listen: "", TokenFile: "/etc/l4lb/admin.token", MaxConnections: 8},
		Log:    Log{Level: "debug", Format: "json", Access: "off", Process: "stderr", Syslog: "/dev/log", SyslogFormat: "rfc5424", SyslogFacility: "daemon"},
		Cluster: Cluster{
			Store:          "redis",
			RedisURL:       "rediss://l4lb@10.0.0.6:26379",
			PasswordFile:   "/etc/l4lb/redis.password",
			TLSCAFile:      "/etc/l4lb/redis-ca.pem",
			TLSCertFile:    "/etc/l4lb/redis-client.pem",
			TLSKeyFile:     "/etc/l4lb/redis-client.key",
			TLSServerName:  "redis.internal",
			SentinelMaster: "l4lb",
			SentinelAddrs:  []string{"10.0.0.7:26379", "[fd00::8]:26379"},
			KeyPrefix:      "lb/prod:",
			SyncInterval:   5 * time.Second,
			Timeout:        time.Second,
			Instance:       "lb-1",
			TripQuorum:     3,
		},
		Listeners: []Listener{
			{Name: "db", Bind: "0.0.0.0:5432", Protocol: "tcp", Pool: "pg", Backlog: 4096, Line: 17, SessionTimeout: time.Minute, MaxSessions: 4096, ProxyTimeout: 3 * time.Second, SourceIPv4Prefix: 32, SourceIPv6Prefix: 64, InspectTimeout: 5 * time.Second, OnUnrecognized: "fallback", OnTooLarge: "fallback", AccessLog: true},
			{Name: "db6", Bind: "[::]:5432", Protocol: "tcp", Pool: "pg", Backlog: 0, Line: 24, SessionTimeout: time.Minute, MaxSessions: 4096, ProxyTimeout: 3 * time.Second, SourceIPv4Prefix: 32, SourceIPv6Prefix: 64, InspectTimeout: 5 * time.Second, OnUnrecognized: "fallback", OnTooLarge: "fallback", AccessLog: true},
			{Name: "dns", Bind: "0.0.0.0:5432", Protocol: "udp", Pool: "dns", Line: 75,
				SessionTimeout: 5 * time.Second, MaxSessions: 1000000, Responses: 1, Requests: 3, ProxyTimeout: 3 * time.Second, SourceIPv4Prefix: 32, SourceIPv6Prefix: 64, InspectTimeout: 5 * time.Second, OnUnrecognized: "fallback", OnTooLarge: "fallback"},
		},
		Pools: map[string]*Pool{
			"pg": {
				Name:              "pg",
				Algorithm:         "maglev",
				HashKey:           "source-ip-port",
				ConnectTimeout:    500 * time.Millisecond,
				ConnectBudget:     time.Second,
				IdleTimeout:       time.Hour,
				Retries:           0,
				SlowStart:         30 * time.Second,
				HashBalanceFactor: 1.25,
				RingVnodes:        40,
				MaglevTableSize:   251,
				Backends: []Backend{
					{Addr: "10.0.0.1:5432", Weight: 0, ID: "pg-a", Line: 41},
					{Addr: "[2001:db8::2]:5432", Weight: 256, Line: 46, Backup: true},
				},
				Protocol:     "tcp",
				ReplyTimeout: 2 * time.Second,
				Health:       Health{Enabled: false, Type: "connect", Port: 15432, Interval: 10 * time.Second, Timeout: 10 * time.Second, Rise: 1, Fall: 1},
				Breaker: Breaker{
					Failures: 10, Window: time.Minute, MinRatio: 0.5, MinVolume: 20,
					Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Second, Successes: 3, CountEarlyReset: true,
					EarlyResetWindow: 30 * time.Second,
				},
				Line:          29,
				ProxyProtocol: "off",
			},
			"spare": spare,
			"dns":   dns,
		},
		PoolNames: []string{"dns", "pg", "spare"},
	}
	want.file, want.pos = cfg.file, cfg.pos // where it came from: not the point here
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\n     %+v\nwant %+v\n     %+v", cfg, *cfg.Pools["pg"], want, *want.Pools["pg"])
	}
	if got := cfg.Pools["pg"].Backends[0].Identity(); got != "pg-a" {
		t.Errorf("Identity with id = %q, want pg-a", got)
	}
	if got := cfg.Pools["pg"].Backends[1].Identity(); got != "[2001:db8::2]:5432" {
		t.Errorf("Identity without id = %q, want the addr", got)
	}
}

func TestParseAcceptsIPv6(t *testing.T) {
	src := `[admin]
listen = "[::1]:9090"
[[listener]]
name = "v6"
bind = "[::1]:8080"
pool = "web"
[[listener]]
name = "v4"
bind = "127.0.0.1:8080"
pool = "web"
[pool.web]
backend = [{ addr = "[::1]:9001" }, { addr = "[fe80::1%lo]:9001" }, { addr = "127.0.0.1:9001" }]
`
	cfg := mustParse(t, src)
	if got := cfg.Listeners[0].Bind; got != "[::1]:8080" {
		t.Errorf("bind = %q, want [::1]:8080", got)
	}
	var addrs []string
	for _, b := range cfg.Pools["web"].Backends {
		addrs = append(addrs, b.Addr)
		if b.Line != 12 {
			t.Errorf("backend %s line = %d, want 12", b.Addr, b.Line)
		}
	}
	if want := []string{"[::1]:9001", "[fe80::1%lo]:9001", "127.0.0.1:9001"}; !reflect.DeepEqual(addrs, want) {
		t.Errorf("backends = %v, want %v", addrs, want)
	}
}

// TestParseAcceptsEdgeValues checks boundary values that are allowed.
func TestParseAcceptsEdgeValues(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{"unused pool", validBase + "[pool.idle]\n[[pool.idle.backend]]\naddr = \"127.0.0.1:9\"\n"},
		{"integer float", withPool("hash_balance_factor = 2\n")},
		{"balance factor just above one", withPool("hash_balance_factor = 1.0001\n")},
		{"maglev size equal to backends", withPool("maglev_table_size = 2\n") + "[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\n"},
		{"largest maglev size", withPool("maglev_table_size = 10000019\n")},
		{"health timeout equal to interval", validBase + "[pool.web.health]\ninterval = \"1s\"\ntimeout = \"1s\"\n"},
		{"disabled health keeps its checks", validBase + "[pool.web.health]\nenabled = false\n"},
		{"min ratio one", validBase + "[pool.web.breaker]\nmin_ratio = 1\n"},
		{"empty admin listen", validBase + "[admin]\nlisten = \"\"\n"},
		{"port 65535", withListener("name = \"a\"\nbind = \"127.0.0.1:65535\"\npool = \"web\"\n")},
		{"same port on different hosts", validBase + "[[listener]]\nname = \"b\"\nbind = \"127.0.0.2:8080\"\npool = \"web\"\n"},
		{"same addr in different pools", validBase + "[pool.b]\n[[pool.b.backend]]\naddr = \"127.0.0.1:9001\"\n"},
		{"weight zero beside a weighted backend", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = 0\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\n")},
		{"consistent-hash ring at its largest", withBackends("algorithm = \"consistent-hash\"\nring_vnodes = 8192\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = 256\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nweight = 256\n")},
		{"large ring settings under maglev", withBackends("algorithm = \"maglev\"\nring_vnodes = 10000\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = 256\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nweight = 256\n")},
		{"explicit empty ids", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nid = \"\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nid = \"\"\n")},
		{"crlf line endings", "[[listener]]\r\nname = \"web\"\r\nbind = \"127.0.0.1:8080\"\r\npool = \"web\"\r\n[pool.web]\r\n[[pool.web.backend]]\r\naddr = \"127.0.0.1:9001\"\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustParse(t, tt.src) })
	}
}

// TestConnectBudgetFollowsConnectTimeout checks the budget's default: 5s,
// or connect_timeout when that is longer and connect_budget is not written,
// so raising connect_timeout alone never turns into an error.
func TestConnectBudgetFollowsConnectTimeout(t *testing.T) {
	tests := []struct {
		name string
		keys string
		want time.Duration
	}{
		{"defaults", "", 5 * time.Second},
		{"short timeout keeps the default", "connect_timeout = \"3s\"\n", 5 * time.Second},
		{"long timeout raises the default", "connect_timeout = \"10s\"\n", 10 * time.Second},
		{"written budget wins", "connect_timeout = \"1s\"\nconnect_budget = \"3s\"\n", 3 * time.Second},
		{"budget equal to timeout", "connect_timeout = \"10s\"\nconnect_budget = \"10s\"\n", 10 * time.Second},
		{"budget written before timeout", "connect_budget = \"20s\"\nconnect_timeout = \"10s\"\n", 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, withPool(tt.keys)).Pools["web"].ConnectBudget; got != tt.want {
				t.Errorf("connect budget = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "l4lb.toml")
	if err := os.WriteFile(path, []byte(validBase+"[global]\nmax_connections = -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].File != path || errs[0].Line != 9 {
		t.Fatalf("Load = %v, want one error at %s:9", err, path)
	}

	_, err = Load(filepath.Join(dir, "missing.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Errorf("an unreadable file must not be ErrInvalid")
	}
}

// accept_loops, the older name of event_loops, still sets it; both at once
// is an error naming the older key.
func TestAcceptLoopsIsTheOlderNameOfEventLoops(t *testing.T) {
	base := "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n[pool.web]\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n"
	cfg, err := Parse("t.toml", []byte("[global]\naccept_loops = 3\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.EventLoops != 3 {
		t.Fatalf("accept_loops = 3 gave event_loops %d", cfg.Global.EventLoops)
	}
	_, err = Parse("t.toml", []byte("[global]\nevent_loops = 2\naccept_loops = 3\n"+base))
	if err == nil || !strings.Contains(err.Error(), "global.accept_loops") || !strings.Contains(err.Error(), "older name of event_loops") {
		t.Fatalf("both keys: %v, want an error at global.accept_loops", err)
	}
}
