package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// boundCase is one duration or count key at the edges of its range: each
// of ok parses, and small and large (when set) are each the file's one
// error, at key on its own line, saying want.
type boundCase struct {
	key              string
	src              func(value string) string // a valid file but for key = value, on a line marked "#!"
	ok               []string
	small, wantSmall string
	large, wantLarge string // "": no ceiling of its own
}

// durBounds is the case of a duration key in lo..hi (hi MaxDuration: a
// floor only), 0 allowed as zero when zero is not "". The values are one
// nanosecond past each end, so a bound off by one unit fails too.
func durBounds(key string, src func(string) string, lo, hi time.Duration, zero string) boundCase {
	q := func(d time.Duration) string { return strconv.Quote(d.String()) }
	c := boundCase{key: key, src: src, ok: []string{q(lo), q(hi)}}
	if zero != "" {
		c.ok = append(c.ok, `"0s"`)
	}
	rng := fmt.Sprintf("between %v and %v", lo, hi)
	if hi == MaxDuration {
		rng = fmt.Sprintf("at least %v", lo)
	}
	if zero != "" {
		rng = fmt.Sprintf(`"0s" (%s) or %s`, zero, rng)
	}
	if lo == 0 {
		c.small, c.wantSmall = `"-1ns"`, `"-1ns" is negative`
	} else {
		c.small, c.wantSmall = q(lo-1), fmt.Sprintf("%v is out of range: must be %s", lo-1, rng)
	}
	c.large = q(hi + 1)
	if hi == MaxDuration {
		c.wantLarge = fmt.Sprintf("%s is too long: at most %v (100 years)", c.large, MaxDuration)
	} else {
		c.wantLarge = fmt.Sprintf("%v is out of range: must be %s", hi+1, rng)
	}
	return c
}

// intBounds is the case of an integer key in lo..hi (hi math.MaxInt: no
// ceiling).
func intBounds(key string, src func(string) string, lo, hi int) boundCase {
	c := boundCase{key: key, src: src, ok: []string{strconv.Itoa(lo), strconv.Itoa(hi)}}
	rng := fmt.Sprintf("between %d and %d", lo, hi)
	if hi == math.MaxInt {
		rng = fmt.Sprintf("at least %d", lo)
	} else {
		c.large, c.wantLarge = strconv.Itoa(hi+1), fmt.Sprintf("%d is out of range: must be %s", hi+1, rng)
	}
	c.small, c.wantSmall = strconv.Itoa(lo-1), fmt.Sprintf("%d is out of range: must be %s", lo-1, rng)
	return c
}

// at returns a src function writing name = value, marked, after prefix
// and before suffix.
func at(prefix, name, suffix string) func(string) string {
	return func(v string) string { return prefix + name + " = " + v + " #!\n" + suffix }
}

// TestBounds refuses every duration and count key one step past each end
// of its range (issue 25: health interval = "1ns" passed and dialed
// 137,000 times a second), with the key, its line, the value and the range
// in the error, and accepts each end itself.
func TestBounds(t *testing.T) {
	global := func(name string) func(string) string { return at("[global]\n", name, validBase) }
	tcpListener := func(name string) func(string) string {
		return at("[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n", name, poolWeb)
	}
	pool := func(name string) func(string) string {
		return at(listenerWeb+"[pool.web]\n", name, "[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n")
	}
	health := func(name string) func(string) string { return at(validBase+"[pool.web.health]\n", name, "") }
	breaker := func(name string) func(string) string { return at(validBase+"[pool.web.breaker]\n", name, "") }
	redis := validBase + "[cluster]\nstore = \"redis\"\nredis_url = \"redis://127.0.0.1:6379\"\n"
	maxDur := strconv.Quote(MaxDuration.String())

	healthTimeout := durBounds("pool.web.health.timeout", at(validBase+"[pool.web.health]\ninterval = \"1h\"\n", "timeout", ""), MinCheckTimeout, MaxDuration, "")
	healthTimeout.ok = []string{strconv.Quote(MinCheckTimeout.String()), strconv.Quote(MaxCheckInterval.String())} // at most interval
	clusterTimeout := durBounds("cluster.timeout", at(redis+"sync_interval = \"1h\"\n", "timeout", ""), MinStoreTimeout, MaxDuration, "")
	clusterTimeout.ok = clusterTimeout.ok[:1] // below sync_interval

	tests := []boundCase{
		// [global]
		durBounds("global.shutdown_timeout", global("shutdown_timeout"), 0, MaxDuration, ""),
		intBounds("global.max_connections", global("max_connections"), 0, MaxClientConnections),
		intBounds("global.event_loops", global("event_loops"), 0, MaxEventLoops),
		intBounds("global.accept_loops", global("accept_loops"), 0, MaxEventLoops),
		intBounds("global.pipe_size", global("pipe_size"), MinPipeSize, MaxPipeSize),
		durBounds("global.busy_poll", global("busy_poll"), time.Microsecond, MaxBusyPoll, "off"),
		durBounds("global.wake_coalesce", global("wake_coalesce"), time.Microsecond, MaxWakeCoalesce, "off"),
		// [admin]
		intBounds("admin.max_connections", at(validBase+"[admin]\n", "max_connections", ""), 1, MaxAdminConns),
		// [cluster]
		durBounds("cluster.sync_interval", at(redis+"timeout = \"10ms\"\n", "sync_interval", ""), MinSyncInterval, MaxSyncInterval, ""),
		clusterTimeout,
		// [[listener]], TCP
		intBounds("listener[0].backlog", tcpListener("backlog"), 0, MaxBacklog),
		durBounds("listener[0].proxy_timeout", tcpListener("accept_proxy = true\ntrusted_proxies = [\"10.0.0.0/8\"]\nproxy_timeout"), MinProxyTimeout, MaxProxyTimeout, ""),
		intBounds("listener[0].max_connections_per_source", tcpListener("max_connections_per_source"), 0, MaxConnectionsPerSource),
		intBounds("listener[0].burst_per_source", tcpListener("rate_per_source = 1.0\nburst_per_source"), 0, math.MaxInt),
		intBounds("listener[0].source_ipv4_prefix", tcpListener("max_connections_per_source = 1\nsource_ipv4_prefix"), 1, 32),
		intBounds("listener[0].source_ipv6_prefix", tcpListener("max_connections_per_source = 1\nsource_ipv6_prefix"), 1, 128),
		{key: "listener[0].keepalive", src: tcpListener("keepalive"), ok: []string{`"off"`, `"1s"`, `"2h"`},
			small: `"999ms"`, wantSmall: fmt.Sprintf(`"999ms" is out of range: must be "off" or between %v and %v`, MinKeepalive, MaxKeepalive),
			large: `"2h0m1s"`, wantLarge: fmt.Sprintf(`"2h0m1s" is out of range: must be "off" or between %v and %v`, MinKeepalive, MaxKeepalive)},
		durBounds("listener[0].keepalive_interval", tcpListener("keepalive = \"60s\"\nkeepalive_interval"), MinKeepaliveInterval, MaxKeepaliveInterval, "the kernel's default"),
		intBounds("listener[0].keepalive_count", tcpListener("keepalive = \"60s\"\nkeepalive_count"), 0, MaxKeepaliveCount),
		// [[listener]], UDP
		durBounds("listener[0].session_timeout", at(listenerDNS, "session_timeout", poolDNS), MinIdleTimeout, MaxDuration, ""),
		intBounds("listener[0].max_sessions", at(listenerDNS, "max_sessions", poolDNS), 1, MaxUDPSessions),
		intBounds("listener[0].responses", at(listenerDNS, "responses", poolDNS), 0, math.MaxInt),
		intBounds("listener[0].requests", at(listenerDNS, "requests", poolDNS), 0, math.MaxInt),
		// [pool.NAME]
		durBounds("pool.web.connect_timeout", pool("connect_timeout"), MinConnectTimeout, MaxDuration, ""),
		durBounds("pool.web.connect_budget", pool("connect_timeout = \"10ms\"\nconnect_budget"), MinConnectTimeout, MaxDuration, ""),
		durBounds("pool.web.idle_timeout", pool("idle_timeout"), MinIdleTimeout, MaxDuration, ""),
		durBounds("pool.dns.reply_timeout", at(listenerDNS+"[pool.dns]\n", "reply_timeout", "[[pool.dns.backend]]\naddr = \"127.0.0.1:9053\"\n"), MinConnectTimeout, MaxDuration, ""),
		intBounds("pool.web.retries", pool("retries"), 0, MaxRetries),
		durBounds("pool.web.slow_start", pool("slow_start"), 0, MaxDuration, ""),
		durBounds("pool.web.queue_timeout", pool("queue_timeout"), 0, MaxQueueTimeout, ""),
		intBounds("pool.web.ring_vnodes", pool("ring_vnodes"), 1, MaxRingVnodes),
		durBounds("pool.web.keepalive_interval", pool("keepalive = \"60s\"\nkeepalive_interval"), MinKeepaliveInterval, MaxKeepaliveInterval, "the kernel's default"),
		intBounds("pool.web.keepalive_count", pool("keepalive = \"60s\"\nkeepalive_count"), 0, MaxKeepaliveCount),
		// [[pool.NAME.backend]]; a second backend keeps weight 0 from
		// being every backend's.
		intBounds("pool.web.backend[0].weight", at(listenerWeb+"[pool.web]\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n", "weight", "[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\n"), 0, MaxWeight),
		intBounds("pool.web.backend[0].max_connections", at(listenerWeb+"[pool.web]\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n", "max_connections", ""), 0, MaxBackendConnections),
		// [pool.NAME.health]
		durBounds("pool.web.health.interval", at(validBase+"[pool.web.health]\ntimeout = \"10ms\"\n", "interval", ""), MinCheckInterval, MaxCheckInterval, ""),
		healthTimeout,
		intBounds("pool.web.health.port", health("port"), 0, 65535),
		intBounds("pool.web.health.rise", health("rise"), 1, MaxRiseFall),
		intBounds("pool.web.health.fall", health("fall"), 1, MaxRiseFall),
		// [pool.NAME.breaker]
		intBounds("pool.web.breaker.failures", breaker("failures"), 1, MaxBreakerCount),
		durBounds("pool.web.breaker.window", breaker("window"), MinBreakerWindow, MaxDuration, ""),
		intBounds("pool.web.breaker.min_volume", breaker("min_volume"), 0, MaxBreakerCount),
		durBounds("pool.web.breaker.cooldown", at(validBase+"[pool.web.breaker]\nmax_cooldown = "+maxDur+"\n", "cooldown", ""), MinCooldown, MaxDuration, ""),
		durBounds("pool.web.breaker.max_cooldown", at(validBase+"[pool.web.breaker]\ncooldown = \"10ms\"\n", "max_cooldown", ""), MinCooldown, MaxDuration, ""),
		intBounds("pool.web.breaker.successes", breaker("successes"), 1, MaxBreakerCount),
		durBounds("pool.web.breaker.early_reset_window", breaker("early_reset_window"), MinEarlyResetWindow, MaxDuration, ""),
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			for _, v := range tt.ok {
				mustParse(t, tt.src(v))
			}
			for _, c := range []struct{ value, want string }{{tt.small, tt.wantSmall}, {tt.large, tt.wantLarge}} {
				if c.value == "" {
					continue
				}
				src := tt.src(c.value)
				errs := parseErrors(t, src)
				wantOneError(t, problem{tt.key + " = " + c.value, src, tt.key, c.want}, errs)
				// As `l4lb check` prints it: file, line, key, value, range.
				if want := fmt.Sprintf("test.toml:%d: %s: %s", markedLine(t, src), tt.key, c.want); !strings.Contains(errs.Error(), want) {
					t.Errorf("%s = %s: error %q, want %q", tt.key, c.value, errs.Error(), want)
				}
			}
		})
	}
}

// TestIssue25Values refuses the values that passed before issue 25: the
// issue's own "1ns" interval, and the old ceilings of the keys whose
// ceiling came down (TestBounds, deriving its values from the bounds,
// would pass on the old ones too).
func TestIssue25Values(t *testing.T) {
	tests := []problem{
		{"the issue's interval", validBase + "[pool.web.health]\ninterval = \"1ns\" #!\n", "pool.web.health.interval", "1ns is out of range: must be between 10ms and"},
		{"max_connections at the old ceiling, math.MaxInt", "[global]\nmax_connections = 9223372036854775807 #!\n" + validBase, "global.max_connections", "9223372036854775807 is out of range: must be between 0 and"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, parseErrors(t, tt.src)) })
	}
}
