package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// withTCPListener is a valid file whose only listener, web, is a TCP one
// (protocol left out) with the given further keys (from line 5).
func withTCPListener(keys string) string {
	return withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n" + keys)
}

// withProxy is withTCPListener with accept_proxy = true and
// trusted_proxies set (lines 5 and 6), the given keys from line 7.
func withProxy(keys string) string {
	return withTCPListener("accept_proxy = true\ntrusted_proxies = [\"10.0.0.0/8\"]\n" + keys)
}

// withBackendKeys is a valid file whose pool web has one backend with the
// given further keys (from line 8).
func withBackendKeys(keys string) string {
	return withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n" + keys)
}

// withGlobal is a valid file with a [global] table of the given keys.
func withGlobal(keys string) string { return validBase + "[global]\n" + keys }

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// TestPolicyDefaults: every traffic-policy key left out is off, with the
// defaults written out as literals so a changed default fails here.
func TestPolicyDefaults(t *testing.T) {
	if got := DefaultListener().ProxyTimeout; got != 3*time.Second {
		t.Errorf("DefaultListener().ProxyTimeout = %v, want 3s", got)
	}
	if got := DefaultPool("p").ProxyProtocol; got != "off" {
		t.Errorf("DefaultPool().ProxyProtocol = %q, want off", got)
	}
	for _, src := range []string{validBase, validUDP} {
		cfg := mustParse(t, src)
		l := cfg.Listeners[0]
		if l.AcceptProxy || l.TrustedProxies != nil || l.ProxyTimeout != 3*time.Second || l.Allow != nil || l.Deny != nil ||
			l.MaxConnsPerSource != 0 || l.RatePerSource != 0 || l.BurstPerSource != 0 ||
			l.Keepalive != 0 || l.KeepaliveInterval != 0 || l.KeepaliveCount != 0 {
			t.Errorf("listener policy defaults: %+v", l)
		}
		p := cfg.Pools[l.Pool]
		if p.ProxyProtocol != "off" || p.QueueTimeout != 0 || p.Keepalive != 0 || p.KeepaliveInterval != 0 || p.KeepaliveCount != 0 {
			t.Errorf("pool policy defaults: %+v", *p)
		}
		if b := p.Backends[0]; b.MaxConnections != 0 || DefaultBackend().MaxConnections != 0 {
			t.Errorf("backend max_connections default: %+v", b)
		}
		if cfg.Global.StateFile != "" || DefaultGlobal().StateFile != "" {
			t.Errorf("state_file default: %q", cfg.Global.StateFile)
		}
	}
}

// TestPolicyReadsEveryKey sets every traffic-policy key to a value other
// than its default.
func TestPolicyReadsEveryKey(t *testing.T) {
	src := `[global]
state_file = "/var/lib/l4lb/state.json"
[[listener]]
name = "web"
bind = "127.0.0.1:8080"
pool = "web"
accept_proxy = true
trusted_proxies = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"]
proxy_timeout = "500ms"
allow = ["0.0.0.0/0", "::ffff:198.51.100.0/120"]
deny = ["198.51.100.66", "2001:db8::7"]
max_connections_per_source = 100
rate_per_source = 2.5
burst_per_source = 10
keepalive = "75s"
keepalive_interval = "15s"
keepalive_count = 9
[[listener]]
name = "dns"
bind = "127.0.0.1:5353"
protocol = "udp"
pool = "dns"
allow = ["10.0.0.0/8"]
deny = ["10.0.0.1"]
[pool.web]
proxy_protocol = "v2"
queue_timeout = "250ms"
keepalive = "2h"
keepalive_interval = "1h"
keepalive_count = 127
[[pool.web.backend]]
addr = "127.0.0.1:9001"
max_connections = 1000
[pool.dns]
proxy_protocol = "v2"
[[pool.dns.backend]]
addr = "127.0.0.1:9053"
max_connections = 1000000
`
	cfg := mustParse(t, src)
	if cfg.Global.StateFile != "/var/lib/l4lb/state.json" {
		t.Errorf("state_file = %q", cfg.Global.StateFile)
	}
	web := DefaultListener()
	web.Name, web.Bind, web.Pool, web.Line = "web", "127.0.0.1:8080", "web", 3
	web.AcceptProxy = true
	web.TrustedProxies = prefixes("10.0.0.0/8", "2001:db8::/32", "192.0.2.7/32")
	web.ProxyTimeout = 500 * time.Millisecond
	web.Allow = prefixes("0.0.0.0/0", "198.51.100.0/24")
	web.Deny = prefixes("198.51.100.66/32", "2001:db8::7/128")
	web.MaxConnsPerSource = 100
	web.RatePerSource = 2.5
	web.BurstPerSource = 10
	web.Keepalive, web.KeepaliveInterval, web.KeepaliveCount = 75*time.Second, 15*time.Second, 9
	if got := cfg.Listeners[0]; !reflect.DeepEqual(got, web) {
		t.Errorf("tcp listener\n got %+v\nwant %+v", got, web)
	}
	dns := DefaultListener()
	dns.Name, dns.Bind, dns.Protocol, dns.Pool, dns.Line = "dns", "127.0.0.1:5353", "udp", "dns", 18
	dns.Allow, dns.Deny = prefixes("10.0.0.0/8"), prefixes("10.0.0.1/32")
	if got := cfg.Listeners[1]; !reflect.DeepEqual(got, dns) {
		t.Errorf("udp listener\n got %+v\nwant %+v", got, dns)
	}
	p := cfg.Pools["web"]
	if p.ProxyProtocol != "v2" || p.QueueTimeout != 250*time.Millisecond || p.Keepalive != 2*time.Hour || p.KeepaliveInterval != time.Hour || p.KeepaliveCount != 127 {
		t.Errorf("tcp pool: %+v", *p)
	}
	if b := p.Backends[0]; b.MaxConnections != 1000 {
		t.Errorf("tcp backend: %+v", b)
	}
	u := cfg.Pools["dns"]
	if u.ProxyProtocol != "v2" || u.Backends[0].MaxConnections != 1_000_000 {
		t.Errorf("udp pool: %+v", *u)
	}
}

func TestPolicyAccepts(t *testing.T) {
	tests := []struct {
		name, src string
		check     func(*Config) bool
	}{
		// Client networks.
		{"bare IPv4 address is a /32", withTCPListener("allow = [\"192.0.2.7\"]\n"),
			func(c *Config) bool { return reflect.DeepEqual(c.Listeners[0].Allow, prefixes("192.0.2.7/32")) }},
		{"bare IPv6 address is a /128", withTCPListener("deny = [\"2001:db8::7\"]\n"),
			func(c *Config) bool { return reflect.DeepEqual(c.Listeners[0].Deny, prefixes("2001:db8::7/128")) }},
		{"IPv4-mapped network is IPv4", withTCPListener("allow = [\"::ffff:10.0.0.0/104\", \"::ffff:0:0/96\"]\n"),
			func(c *Config) bool {
				return reflect.DeepEqual(c.Listeners[0].Allow, prefixes("10.0.0.0/8", "0.0.0.0/0"))
			}},
		{"IPv4-mapped address is IPv4", withTCPListener("deny = [\"::ffff:192.0.2.7\", \"::FFFF:192.0.2.8/128\"]\n"),
			func(c *Config) bool {
				return reflect.DeepEqual(c.Listeners[0].Deny, prefixes("192.0.2.7/32", "192.0.2.8/32"))
			}},
		{"every address", withTCPListener("allow = [\"0.0.0.0/0\", \"::/0\"]\n"),
			func(c *Config) bool { return reflect.DeepEqual(c.Listeners[0].Allow, prefixes("0.0.0.0/0", "::/0")) }},
		{"IPv6 network", withTCPListener("allow = [\"2001:DB8::/32\"]\n"),
			func(c *Config) bool { return reflect.DeepEqual(c.Listeners[0].Allow, prefixes("2001:db8::/32")) }},
		{"empty lists are nil", withTCPListener("allow = []\ndeny = []\n"),
			func(c *Config) bool { return c.Listeners[0].Allow == nil && c.Listeners[0].Deny == nil }},
		{"a network in both allow and deny (deny wins, at run time)", withTCPListener("allow = [\"10.0.0.0/8\"]\ndeny = [\"10.0.0.0/8\"]\n"),
			func(c *Config) bool { return len(c.Listeners[0].Allow) == 1 && len(c.Listeners[0].Deny) == 1 }},
		{"overlapping networks", withTCPListener("allow = [\"10.0.0.0/8\", \"10.1.0.0/16\", \"10.1.2.3\"]\n"),
			func(c *Config) bool { return len(c.Listeners[0].Allow) == 3 }},
		{"allow and deny on a udp listener", withUDPListener("allow = [\"10.0.0.0/8\"]\ndeny = [\"10.9.0.0/16\"]\n"),
			func(c *Config) bool {
				return reflect.DeepEqual(c.Listeners[0].Allow, prefixes("10.0.0.0/8")) && reflect.DeepEqual(c.Listeners[0].Deny, prefixes("10.9.0.0/16"))
			}},

		// PROXY protocol, client side.
		{"accept_proxy with the default timeout", withProxy(""),
			func(c *Config) bool { l := c.Listeners[0]; return l.AcceptProxy && l.ProxyTimeout == 3*time.Second }},
		{"shortest proxy_timeout", withProxy("proxy_timeout = \"100ms\"\n"),
			func(c *Config) bool { return c.Listeners[0].ProxyTimeout == 100*time.Millisecond }},
		{"longest proxy_timeout", withProxy("proxy_timeout = \"1m\"\n"),
			func(c *Config) bool { return c.Listeners[0].ProxyTimeout == time.Minute }},
		{"accept_proxy = false alone", withTCPListener("accept_proxy = false\n"),
			func(c *Config) bool { return !c.Listeners[0].AcceptProxy }},
		{"accept_proxy with protocol = tcp", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"tcp\"\npool = \"web\"\naccept_proxy = true\ntrusted_proxies = [\"::1\"]\n"),
			func(c *Config) bool { return reflect.DeepEqual(c.Listeners[0].TrustedProxies, prefixes("::1/128")) }},

		// Per source.
		{"max_connections_per_source at its bounds", withTCPListener("max_connections_per_source = 1000000\n"),
			func(c *Config) bool { return c.Listeners[0].MaxConnsPerSource == 1_000_000 }},
		{"max_connections_per_source 0", withTCPListener("max_connections_per_source = 0\n"),
			func(c *Config) bool { return c.Listeners[0].MaxConnsPerSource == 0 }},
		{"rate as an integer", withTCPListener("rate_per_source = 10\n"),
			func(c *Config) bool { l := c.Listeners[0]; return l.RatePerSource == 10 && l.BurstPerSource == 0 }},
		{"fractional rate", withTCPListener("rate_per_source = 0.5\n"),
			func(c *Config) bool { l := c.Listeners[0]; return l.RatePerSource == 0.5 && l.BurstPerSource == 0 }},
		{"highest rate", withTCPListener("rate_per_source = 1e6\n"),
			func(c *Config) bool { return c.Listeners[0].RatePerSource == 1e6 }},
		{"rate 0 written", withTCPListener("rate_per_source = 0.0\n"),
			func(c *Config) bool { return c.Listeners[0].RatePerSource == 0 }},
		{"burst with a rate", withTCPListener("rate_per_source = 2.5\nburst_per_source = 50\n"),
			func(c *Config) bool { l := c.Listeners[0]; return l.BurstPerSource == 50 }},
		{"burst 0 with a rate", withTCPListener("rate_per_source = 2.5\nburst_per_source = 0\n"),
			func(c *Config) bool { l := c.Listeners[0]; return l.BurstPerSource == 0 }},
		{"source prefixes left out", withTCPListener("max_connections_per_source = 4\n"),
			func(c *Config) bool { l := c.Listeners[0]; return l.SourceIPv4Prefix == 32 && l.SourceIPv6Prefix == 64 }},
		{"source prefixes at their bounds, with a cap", withTCPListener("max_connections_per_source = 4\nsource_ipv4_prefix = 1\nsource_ipv6_prefix = 128\n"),
			func(c *Config) bool { l := c.Listeners[0]; return l.SourceIPv4Prefix == 1 && l.SourceIPv6Prefix == 128 }},
		{"source prefixes with a rate only", withTCPListener("rate_per_source = 1\nsource_ipv4_prefix = 24\nsource_ipv6_prefix = 48\n"),
			func(c *Config) bool { l := c.Listeners[0]; return l.SourceIPv4Prefix == 24 && l.SourceIPv6Prefix == 48 }},

		// Keepalive.
		{"keepalive off", withTCPListener("keepalive = \"off\"\n"), func(c *Config) bool { return c.Listeners[0].Keepalive == 0 }},
		{"shortest keepalive", withTCPListener("keepalive = \"1s\"\n"), func(c *Config) bool { return c.Listeners[0].Keepalive == time.Second }},
		{"longest keepalive", withTCPListener("keepalive = \"2h\"\n"), func(c *Config) bool { return c.Listeners[0].Keepalive == 2*time.Hour }},
		{"keepalive in other units", withTCPListener("keepalive = \"1m30s\"\nkeepalive_interval = \"1000ms\"\n"),
			func(c *Config) bool {
				return c.Listeners[0].Keepalive == 90*time.Second && c.Listeners[0].KeepaliveInterval == time.Second
			}},
		{"keepalive with the kernel's interval and count", withTCPListener("keepalive = \"60s\"\nkeepalive_interval = \"0s\"\nkeepalive_count = 0\n"),
			func(c *Config) bool {
				l := c.Listeners[0]
				return l.Keepalive == time.Minute && l.KeepaliveInterval == 0 && l.KeepaliveCount == 0
			}},
		{"keepalive interval and count at their bounds", withTCPListener("keepalive = \"60s\"\nkeepalive_interval = \"1h\"\nkeepalive_count = 127\n"),
			func(c *Config) bool {
				l := c.Listeners[0]
				return l.KeepaliveInterval == time.Hour && l.KeepaliveCount == 127
			}},
		{"keepalive count 1", withTCPListener("keepalive = \"60s\"\nkeepalive_count = 1\n"),
			func(c *Config) bool { return c.Listeners[0].KeepaliveCount == 1 }},

		// Pools.
		{"proxy_protocol v1", withPool("proxy_protocol = \"v1\"\n"), func(c *Config) bool { return c.Pools["web"].ProxyProtocol == "v1" }},
		{"proxy_protocol off", withPool("proxy_protocol = \"off\"\n"), func(c *Config) bool { return c.Pools["web"].ProxyProtocol == "off" }},
		{"proxy_protocol v2 in a udp pool", withUDPPool("proxy_protocol = \"v2\"\n"), func(c *Config) bool { return c.Pools["dns"].ProxyProtocol == "v2" }},
		{"proxy_protocol off in a udp pool", withUDPPool("proxy_protocol = \"off\"\n"), func(c *Config) bool { return c.Pools["dns"].ProxyProtocol == "off" }},
		{"proxy_protocol v1 in a pool no listener names", validBase + "[pool.spare]\nproxy_protocol = \"v1\"\n[[pool.spare.backend]]\naddr = \"127.0.0.1:9002\"\n",
			func(c *Config) bool { return c.Pools["spare"].ProxyProtocol == "v1" }},
		{"queue_timeout 0s", withPool("queue_timeout = \"0s\"\n"), func(c *Config) bool { return c.Pools["web"].QueueTimeout == 0 }},
		{"short queue_timeout", withPool("queue_timeout = \"1ms\"\n"), func(c *Config) bool { return c.Pools["web"].QueueTimeout == time.Millisecond }},
		{"longest queue_timeout", withPool("queue_timeout = \"60s\"\n"), func(c *Config) bool { return c.Pools["web"].QueueTimeout == time.Minute }},
		{"pool keepalive", withPool("keepalive = \"30s\"\nkeepalive_interval = \"5s\"\nkeepalive_count = 4\n"),
			func(c *Config) bool {
				p := c.Pools["web"]
				return p.Keepalive == 30*time.Second && p.KeepaliveInterval == 5*time.Second && p.KeepaliveCount == 4
			}},
		{"pool keepalive off", withPool("keepalive = \"off\"\n"), func(c *Config) bool { return c.Pools["web"].Keepalive == 0 }},
		{"keepalive in a pool no listener names", validBase + "[pool.spare]\nkeepalive = \"10s\"\nqueue_timeout = \"1s\"\n[[pool.spare.backend]]\naddr = \"127.0.0.1:9002\"\n",
			func(c *Config) bool { return c.Pools["spare"].Keepalive == 10*time.Second }},

		// Backends.
		{"backend max_connections", withBackendKeys("max_connections = 1000000\n"),
			func(c *Config) bool { return c.Pools["web"].Backends[0].MaxConnections == 1_000_000 }},
		{"backend max_connections 0", withBackendKeys("max_connections = 0\n"),
			func(c *Config) bool { return c.Pools["web"].Backends[0].MaxConnections == 0 }},
		{"udp backend max_connections", listenerDNS + "[pool.dns]\n[[pool.dns.backend]]\naddr = \"127.0.0.1:9053\"\nmax_connections = 64\n",
			func(c *Config) bool { return c.Pools["dns"].Backends[0].MaxConnections == 64 }},

		// state_file.
		{"state_file", withGlobal("state_file = \"/var/lib/l4lb/state.json\"\n"),
			func(c *Config) bool { return c.Global.StateFile == "/var/lib/l4lb/state.json" }},
		{"relative state_file", withGlobal("state_file = \"state.json\"\n"), func(c *Config) bool { return c.Global.StateFile == "state.json" }},
		{"empty state_file", withGlobal("state_file = \"\"\n"), func(c *Config) bool { return c.Global.StateFile == "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c := mustParse(t, tt.src); !tt.check(c) {
				t.Errorf("decoded %+v\n%+v", c.Listeners, c.Pools)
			}
		})
	}
}

func TestPolicyRefuses(t *testing.T) {
	const (
		proxyNotUDP     = `only for protocol = "tcp" listeners: a PROXY header is read at the start of a TCP stream`
		perSourceNotUDP = `only for protocol = "tcp" listeners: a UDP listener counts sessions, not connections, and caps them with max_sessions`
		keepaliveNotUDP = `only for protocol = "tcp" listeners: UDP has no connection to keep alive`
		notAccepting    = "only with accept_proxy = true, and accept_proxy is false"
		noRate          = "only with rate_per_source above 0, and rate_per_source is 0 (off)"
		noLimits        = "only with max_connections_per_source or rate_per_source above 0: it says which client addresses share a limit, and no limit is set"
		keepaliveOff    = `only with keepalive on, and keepalive is "off"`
		udpPool         = `is for TCP pools, and this pool serves udp listener[0] "dns" (line 1): `
		examples        = `e.g. "192.0.2.7", "10.0.0.0/8" or "2001:db8::/32"`
	)
	tests := []problem{
		// TCP listener keys on a UDP listener.
		{"accept_proxy on a udp listener", withUDPListener("accept_proxy = true #!\n"), "listener[0].accept_proxy", proxyNotUDP},
		{"accept_proxy false on a udp listener", withUDPListener("accept_proxy = false #!\n"), "listener[0].accept_proxy", proxyNotUDP},
		{"trusted_proxies on a udp listener", withUDPListener("trusted_proxies = [\"10.0.0.0/8\"] #!\n"), "listener[0].trusted_proxies", proxyNotUDP},
		{"proxy_timeout on a udp listener", withUDPListener("proxy_timeout = \"3s\" #!\n"), "listener[0].proxy_timeout", proxyNotUDP},
		{"max_connections_per_source on a udp listener", withUDPListener("max_connections_per_source = 10 #!\n"), "listener[0].max_connections_per_source", perSourceNotUDP},
		{"rate_per_source on a udp listener", withUDPListener("rate_per_source = 10 #!\n"), "listener[0].rate_per_source", perSourceNotUDP},
		{"burst_per_source on a udp listener", withUDPListener("burst_per_source = 10 #!\n"), "listener[0].burst_per_source", perSourceNotUDP},
		{"keepalive on a udp listener", withUDPListener("keepalive = \"60s\" #!\n"), "listener[0].keepalive", keepaliveNotUDP},
		{"keepalive off on a udp listener", withUDPListener("keepalive = \"off\" #!\n"), "listener[0].keepalive", keepaliveNotUDP},
		{"keepalive_interval on a udp listener", withUDPListener("keepalive_interval = \"5s\" #!\n"), "listener[0].keepalive_interval", keepaliveNotUDP},
		{"keepalive_count on a udp listener", withUDPListener("keepalive_count = 3 #!\n"), "listener[0].keepalive_count", keepaliveNotUDP},
		{"a bad value where the key does not apply is reported once", withUDPListener("keepalive = \"forever\" #!\n"), "listener[0].keepalive", keepaliveNotUDP},
		{"an unknown protocol is reported alone", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"sctp\" #!\npool = \"web\"\nkeepalive = \"60s\"\nmax_connections_per_source = 5\nallow = [\"10.0.0.0/8\"]\n"),
			"listener[0].protocol", `unknown protocol "sctp"`},

		// accept_proxy and what needs it.
		{"accept_proxy without trusted_proxies", withTCPListener("accept_proxy = true #!\n"), "listener[0].trusted_proxies",
			`required with accept_proxy = true: the addresses of the proxies allowed to send a PROXY header, e.g. ["10.0.0.0/8"]`},
		{"accept_proxy with empty trusted_proxies", withTCPListener("accept_proxy = true\ntrusted_proxies = [] #!\n"), "listener[0].trusted_proxies",
			"must not be empty with accept_proxy = true"},
		{"trusted_proxies without accept_proxy", withTCPListener("trusted_proxies = [\"10.0.0.0/8\"] #!\n"), "listener[0].trusted_proxies",
			notAccepting + " (accept_proxy left out means false)"},
		{"trusted_proxies with accept_proxy = false", withTCPListener("accept_proxy = false\ntrusted_proxies = [\"10.0.0.0/8\"] #!\n"), "listener[0].trusted_proxies",
			notAccepting},
		{"empty trusted_proxies without accept_proxy", withTCPListener("trusted_proxies = [] #!\n"), "listener[0].trusted_proxies", notAccepting},
		{"a bad trusted_proxies without accept_proxy is reported once", withTCPListener("trusted_proxies = [\"x y\"] #!\n"), "listener[0].trusted_proxies", notAccepting},
		{"proxy_timeout without accept_proxy", withTCPListener("proxy_timeout = \"3s\" #!\n"), "listener[0].proxy_timeout", notAccepting},
		{"proxy_timeout with accept_proxy = false", withTCPListener("accept_proxy = false\nproxy_timeout = \"5s\" #!\n"), "listener[0].proxy_timeout", notAccepting},
		{"proxy_timeout too short", withProxy("proxy_timeout = \"99ms\" #!\n"), "listener[0].proxy_timeout", "99ms is out of range: must be between 100ms and 1m0s"},
		{"proxy_timeout too long", withProxy("proxy_timeout = \"61s\" #!\n"), "listener[0].proxy_timeout", "1m1s is out of range: must be between 100ms and 1m0s"},
		{"proxy_timeout zero", withProxy("proxy_timeout = \"0s\" #!\n"), "listener[0].proxy_timeout", "0s is out of range"},
		{"proxy_timeout negative", withProxy("proxy_timeout = \"-1s\" #!\n"), "listener[0].proxy_timeout", `"-1s" is negative`},
		{"proxy_timeout as a number", withProxy("proxy_timeout = 3 #!\n"), "listener[0].proxy_timeout", "must be a duration string"},
		{"accept_proxy not a boolean: the others are judged alone", withTCPListener("accept_proxy = \"yes\" #!\ntrusted_proxies = [\"10.0.0.0/8\"]\nproxy_timeout = \"1s\"\n"),
			"listener[0].accept_proxy", `must be true or false, not the string "yes"`},
		{"accept_proxy not a boolean, alone", withTCPListener("accept_proxy = 1 #!\n"), "listener[0].accept_proxy", "must be true or false"},
		{"bad trusted proxy", withTCPListener("accept_proxy = true\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0.5/24\"] #!\n"), "listener[0].trusted_proxies[1]",
			`"10.0.0.5/24" has host bits set: write "10.0.0.0/24" for the network, or "10.0.0.5" for the one address`},
		{"trusted_proxies not an array", withTCPListener("accept_proxy = true\ntrusted_proxies = \"10.0.0.0/8\" #!\n"), "listener[0].trusted_proxies",
			"must be an array of strings"},

		// Client networks.
		{"host bits set", withTCPListener("allow = [\"10.0.0.1/8\"] #!\n"), "listener[0].allow[0]",
			`"10.0.0.1/8" has host bits set: write "10.0.0.0/8" for the network, or "10.0.0.1" for the one address`},
		{"IPv6 host bits set", withTCPListener("deny = [\"2001:db8::1/32\"] #!\n"), "listener[0].deny[0]",
			`"2001:db8::1/32" has host bits set: write "2001:db8::/32" for the network, or "2001:db8::1" for the one address`},
		{"IPv4-mapped host bits set", withTCPListener("allow = [\"::ffff:10.0.0.1/104\"] #!\n"), "listener[0].allow[0]",
			`has host bits set: write "10.0.0.0/8" for the network, or "10.0.0.1" for the one address`},
		{"a zone", withTCPListener("allow = [\"fe80::1%eth0\"] #!\n"), "listener[0].allow[0]",
			`"fe80::1%eth0" has a zone (%eth0): a client address has none; write it without, e.g. "fe80::1"`},
		{"a zone in a network", withTCPListener("deny = [\"fe80::%eth0/64\"] #!\n"), "listener[0].deny[0]",
			`has a zone (%eth0): a client address has none; write it without, e.g. "fe80::/64"`},
		{"IPv4 prefix too long", withTCPListener("allow = [\"10.0.0.0/33\"] #!\n"), "listener[0].allow[0]",
			`"10.0.0.0/33": prefix length 33 is out of range: an IPv4 network has 0..32 bits`},
		{"IPv6 prefix too long", withTCPListener("allow = [\"2001:db8::/129\"] #!\n"), "listener[0].allow[0]",
			"prefix length 129 is out of range: an IPv6 network has 0..128 bits"},
		{"no prefix length", withTCPListener("allow = [\"10.0.0.0/\"] #!\n"), "listener[0].allow[0]", "has no prefix length after the slash"},
		{"prefix length with a leading zero", withTCPListener("allow = [\"10.0.0.0/08\"] #!\n"), "listener[0].allow[0]",
			`prefix length "08" is not a number of bits (0..32, no leading zeros)`},
		{"prefix length with a sign", withTCPListener("allow = [\"10.0.0.0/+8\"] #!\n"), "listener[0].allow[0]", `prefix length "+8" is not a number`},
		{"prefix length a netmask", withTCPListener("allow = [\"10.0.0.0/255.0.0.0\"] #!\n"), "listener[0].allow[0]", `prefix length "255.0.0.0" is not a number`},
		{"a host name", withTCPListener("allow = [\"lb.example.com\"] #!\n"), "listener[0].allow[0]",
			`"lb.example.com" is a name: write an IP address or a CIDR network, ` + examples + "; l4lb does not resolve DNS"},
		{"a host name with a length", withTCPListener("allow = [\"corp.example/24\"] #!\n"), "listener[0].allow[0]", `"corp.example" is a name`},
		{"not an address", withTCPListener("allow = [\"300.1.2.3\"] #!\n"), "listener[0].allow[0]",
			`"300.1.2.3" is not an IP address or a CIDR network (IPv4 field has value >255): ` + examples},
		{"not a network", withTCPListener("allow = [\"10.0.0/8\"] #!\n"), "listener[0].allow[0]", `"10.0.0/8" is not a CIDR network (address "10.0.0": `},
		{"no address before the slash", withTCPListener("allow = [\"/8\"] #!\n"), "listener[0].allow[0]", "is not a CIDR network"},
		{"spaces", withTCPListener("allow = [\" 10.0.0.0/8\"] #!\n"), "listener[0].allow[0]", "is not a CIDR network"},
		{"empty", withTCPListener("deny = [\"\"] #!\n"), "listener[0].deny[0]", "must not be empty: write an address or a CIDR network"},
		{"an address with a port", withTCPListener("deny = [\"10.0.0.1:80\"] #!\n"), "listener[0].deny[0]", "is not an IP address or a CIDR network"},
		{"not a string", withTCPListener("allow = [\"10.0.0.0/8\", 10] #!\n"), "listener[0].allow[1]", "must be a string, not the integer 10"},
		{"not an array", withTCPListener("deny = \"10.0.0.0/8\" #!\n"), "listener[0].deny", `must be an array of strings such as ["a", "b"], not the string "10.0.0.0/8"`},
		{"a network twice", withTCPListener("allow = [\n  \"10.0.0.0/8\",\n  \"::ffff:10.0.0.0/104\", #!\n]\n"), "listener[0].allow[1]",
			`"::ffff:10.0.0.0/104" is 10.0.0.0/8 again: already listener[0].allow[0] (line 6)`},
		{"an address twice", withTCPListener("deny = [\"192.0.2.7\", \"192.0.2.7/32\"] #!\n"), "listener[0].deny[1]", "is 192.0.2.7/32 again: already listener[0].deny[0]"},
		{"a bad network on a udp listener", withUDPListener("deny = [\"1.2.3.4/8\"] #!\n"), "listener[0].deny[0]", "has host bits set"},
		{"a bad element on its own line", withTCPListener("allow = [\n  \"10.0.0.0/8\",\n  \"10.1.0.0/8\", #!\n]\n"), "listener[0].allow[1]", "has host bits set"},

		// Per source.
		{"max_connections_per_source negative", withTCPListener("max_connections_per_source = -1 #!\n"), "listener[0].max_connections_per_source",
			"-1 is out of range: must be between 0 and 1000000"},
		{"max_connections_per_source too high", withTCPListener("max_connections_per_source = 1000001 #!\n"), "listener[0].max_connections_per_source",
			"1000001 is out of range: must be between 0 and 1000000"},
		{"max_connections_per_source a string", withTCPListener("max_connections_per_source = \"10\" #!\n"), "listener[0].max_connections_per_source", "must be an integer"},
		{"rate negative", withTCPListener("rate_per_source = -0.5 #!\n"), "listener[0].rate_per_source",
			"-0.5 is out of range: must be 0 (off) or up to 1000000 new connections a second"},
		{"rate too high", withTCPListener("rate_per_source = 1000000.5 #!\n"), "listener[0].rate_per_source", "1000000.5 is out of range"},
		{"rate not finite", withTCPListener("rate_per_source = inf #!\n"), "listener[0].rate_per_source", "must be a finite number"},
		{"rate a string", withTCPListener("rate_per_source = \"10/s\" #!\n"), "listener[0].rate_per_source", `must be a number, not the string "10/s"`},
		{"burst without rate", withTCPListener("burst_per_source = 5 #!\n"), "listener[0].burst_per_source", noRate + " (rate_per_source left out means 0)"},
		{"burst with rate 0", withTCPListener("rate_per_source = 0\nburst_per_source = 5 #!\n"), "listener[0].burst_per_source", noRate},
		{"burst 0 without rate", withTCPListener("burst_per_source = 0 #!\n"), "listener[0].burst_per_source", noRate},
		{"burst negative", withTCPListener("rate_per_source = 1\nburst_per_source = -1 #!\n"), "listener[0].burst_per_source", "-1 is out of range: must be at least 0"},
		{"burst a float", withTCPListener("rate_per_source = 1\nburst_per_source = 1.5 #!\n"), "listener[0].burst_per_source", "must be an integer"},
		{"bad rate: burst is judged alone", withTCPListener("rate_per_source = \"x\" #!\nburst_per_source = 5\n"), "listener[0].rate_per_source", "must be a number"},
		{"rate out of range: burst is judged alone", withTCPListener("rate_per_source = -1 #!\nburst_per_source = 5\n"), "listener[0].rate_per_source", "out of range"},
		{"ipv4 prefix 0", withTCPListener("max_connections_per_source = 4\nsource_ipv4_prefix = 0 #!\n"), "listener[0].source_ipv4_prefix",
			"0 is out of range: must be between 1 and 32"},
		{"ipv4 prefix past 32", withTCPListener("max_connections_per_source = 4\nsource_ipv4_prefix = 33 #!\n"), "listener[0].source_ipv4_prefix",
			"33 is out of range: must be between 1 and 32"},
		{"ipv6 prefix past 128", withTCPListener("rate_per_source = 1\nsource_ipv6_prefix = 129 #!\n"), "listener[0].source_ipv6_prefix",
			"129 is out of range: must be between 1 and 128"},
		{"ipv6 prefix a string", withTCPListener("rate_per_source = 1\nsource_ipv6_prefix = \"/64\" #!\n"), "listener[0].source_ipv6_prefix", "must be an integer"},
		{"prefix without a limit", withTCPListener("source_ipv6_prefix = 56 #!\n"), "listener[0].source_ipv6_prefix", noLimits + " (both left out mean 0)"},
		{"prefix with both limits 0", withTCPListener("max_connections_per_source = 0\nrate_per_source = 0\nsource_ipv4_prefix = 24 #!\n"), "listener[0].source_ipv4_prefix", noLimits},
		{"bad cap: the prefix is judged alone", withTCPListener("max_connections_per_source = -1 #!\nsource_ipv4_prefix = 24\n"), "listener[0].max_connections_per_source", "out of range"},
		{"source_ipv4_prefix on a udp listener", withUDPListener("source_ipv4_prefix = 24 #!\n"), "listener[0].source_ipv4_prefix", perSourceNotUDP},
		{"source_ipv6_prefix on a udp listener", withUDPListener("source_ipv6_prefix = 64 #!\n"), "listener[0].source_ipv6_prefix", perSourceNotUDP},

		// Keepalive, listener side.
		{"keepalive 0s", withTCPListener("keepalive = \"0s\" #!\n"), "listener[0].keepalive", `"0s" is out of range: must be "off" or between 1s and 2h0m0s`},
		{"keepalive too short", withTCPListener("keepalive = \"500ms\" #!\n"), "listener[0].keepalive", `"500ms" is out of range`},
		{"keepalive too long", withTCPListener("keepalive = \"2h1s\" #!\n"), "listener[0].keepalive", `"2h1s" is out of range`},
		{"keepalive negative", withTCPListener("keepalive = \"-60s\" #!\n"), "listener[0].keepalive", `"-60s" is out of range`},
		{"keepalive not whole seconds", withTCPListener("keepalive = \"1500ms\" #!\n"), "listener[0].keepalive",
			`1.5s is not a whole number of seconds: the kernel takes TCP_KEEPIDLE in seconds; write e.g. "2s"`},
		{"keepalive a boolean", withTCPListener("keepalive = false #!\n"), "listener[0].keepalive", `must be "off" or a duration string such as "60s", not the boolean false`},
		{"keepalive true", withTCPListener("keepalive = true #!\n"), "listener[0].keepalive", `must be "off" or a duration string such as "60s", not the boolean true`},
		{"keepalive a number", withTCPListener("keepalive = 60 #!\n"), "listener[0].keepalive", "not the integer 60"},
		{"keepalive on", withTCPListener("keepalive = \"on\" #!\n"), "listener[0].keepalive", `"on" is neither "off" nor a duration`},
		{"keepalive Off", withTCPListener("keepalive = \"Off\" #!\n"), "listener[0].keepalive", `"Off" is neither "off" nor a duration`},
		{"keepalive without a unit", withTCPListener("keepalive = \"60\" #!\n"), "listener[0].keepalive", `"60" is neither "off" nor a duration`},
		{"keepalive_interval without keepalive", withTCPListener("keepalive_interval = \"10s\" #!\n"), "listener[0].keepalive_interval",
			keepaliveOff + ` (keepalive left out means "off")`},
		{"keepalive_interval with keepalive off", withTCPListener("keepalive = \"off\"\nkeepalive_interval = \"10s\" #!\n"), "listener[0].keepalive_interval", keepaliveOff},
		{"keepalive_interval 0s without keepalive", withTCPListener("keepalive_interval = \"0s\" #!\n"), "listener[0].keepalive_interval", keepaliveOff},
		{"keepalive_count without keepalive", withTCPListener("keepalive_count = 5 #!\n"), "listener[0].keepalive_count", keepaliveOff},
		{"keepalive_count with keepalive off", withTCPListener("keepalive_count = 5 #!\nkeepalive = \"off\"\n"), "listener[0].keepalive_count", keepaliveOff},
		{"keepalive_interval too short", withTCPListener("keepalive = \"60s\"\nkeepalive_interval = \"500ms\" #!\n"), "listener[0].keepalive_interval",
			`500ms is out of range: must be "0s" (the kernel's default) or between 1s and 1h0m0s`},
		{"keepalive_interval too long", withTCPListener("keepalive = \"60s\"\nkeepalive_interval = \"61m\" #!\n"), "listener[0].keepalive_interval", "1h1m0s is out of range"},
		{"keepalive_interval not whole seconds", withTCPListener("keepalive = \"60s\"\nkeepalive_interval = \"2400ms\" #!\n"), "listener[0].keepalive_interval",
			`2.4s is not a whole number of seconds: the kernel takes TCP_KEEPINTVL in seconds; write e.g. "2s"`},
		{"keepalive_interval off", withTCPListener("keepalive = \"60s\"\nkeepalive_interval = \"off\" #!\n"), "listener[0].keepalive_interval", `"off" is not a duration`},
		{"keepalive_count too high", withTCPListener("keepalive = \"60s\"\nkeepalive_count = 128 #!\n"), "listener[0].keepalive_count", "128 is out of range: must be between 0 and 127"},
		{"keepalive_count negative", withTCPListener("keepalive = \"60s\"\nkeepalive_count = -1 #!\n"), "listener[0].keepalive_count", "-1 is out of range: must be between 0 and 127"},
		{"bad keepalive: interval and count are judged alone", withTCPListener("keepalive = \"1ms\" #!\nkeepalive_interval = \"10s\"\nkeepalive_count = 3\n"), "listener[0].keepalive", "out of range"},

		// Misspelt listener keys.
		{"misspelt allow", withTCPListener("alow = [] #!\n"), "listener[0].alow", `did you mean "allow"?`},
		{"misspelt trusted_proxies", withProxy("trusted_proxys = [] #!\n"), "listener[0].trusted_proxys", `did you mean "trusted_proxies"?`},
		{"misspelt keepalive_interval", withTCPListener("keepalive = \"60s\"\nkeepalive_intervall = \"5s\" #!\n"), "listener[0].keepalive_intervall", `did you mean "keepalive_interval"?`},
		{"misspelt max_connections_per_source", withTCPListener("max_connection_per_source = 5 #!\n"), "listener[0].max_connection_per_source", `did you mean "max_connections_per_source"?`},
		{"misspelt accept_proxy in a udp listener", withUDPListener("accept_proxi = true #!\n"), "listener[0].accept_proxi", `did you mean "accept_proxy"?`},

		// Pools.
		{"unknown proxy_protocol", withPool("proxy_protocol = \"v3\" #!\n"), "pool.web.proxy_protocol", `"v3" is not a proxy_protocol setting; use one of: off, v1, v2`},
		{"proxy_protocol as a boolean", withPool("proxy_protocol = true #!\n"), "pool.web.proxy_protocol", "must be a string, not the boolean true"},
		{"proxy_protocol in capitals", withPool("proxy_protocol = \"V2\" #!\n"), "pool.web.proxy_protocol", "is not a proxy_protocol setting"},
		{"proxy_protocol v1 in a udp pool", withUDPPool("proxy_protocol = \"v1\" #!\n"), "pool.dns.proxy_protocol",
			`"v1" is for TCP pools, and this pool serves udp listener[0] "dns" (line 1): v1 has no datagram form; use "v2" or "off"`},
		{"v1 in a pool of both protocols is not judged", listenerWeb + "[[listener]]\nname = \"u\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"udp\"\npool = \"web\" #!\n[pool.web]\nproxy_protocol = \"v1\"\nqueue_timeout = \"1s\"\nkeepalive = \"5s\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n",
			"listener[1].pool", "a pool serves one protocol"},
		{"queue_timeout in a udp pool", withUDPPool("queue_timeout = \"1s\" #!\n"), "pool.dns.queue_timeout", "queue_timeout " + udpPool + "a datagram is not held for a backend's slot"},
		{"queue_timeout 0s in a udp pool", withUDPPool("queue_timeout = \"0s\" #!\n"), "pool.dns.queue_timeout", "queue_timeout " + udpPool},
		{"queue_timeout too long", withPool("queue_timeout = \"61s\" #!\n"), "pool.web.queue_timeout", "1m1s is out of range: must be between 0s and 1m0s"},
		{"queue_timeout negative", withPool("queue_timeout = \"-1s\" #!\n"), "pool.web.queue_timeout", `"-1s" is negative`},
		{"queue_timeout a number", withPool("queue_timeout = 5 #!\n"), "pool.web.queue_timeout", "must be a duration string"},
		{"keepalive in a udp pool", withUDPPool("keepalive = \"60s\" #!\n"), "pool.dns.keepalive", "keepalive " + udpPool + "UDP has no connection to keep alive"},
		{"keepalive off in a udp pool", withUDPPool("keepalive = \"off\" #!\n"), "pool.dns.keepalive", "keepalive " + udpPool},
		{"keepalive_interval in a udp pool", withUDPPool("keepalive_interval = \"5s\" #!\n"), "pool.dns.keepalive_interval", "keepalive_interval " + udpPool},
		{"keepalive_count in a udp pool", withUDPPool("keepalive_count = 3 #!\n"), "pool.dns.keepalive_count", "keepalive_count " + udpPool},
		{"pool keepalive out of range", withPool("keepalive = \"7201s\" #!\n"), "pool.web.keepalive", `"7201s" is out of range: must be "off" or between 1s and 2h0m0s`},
		{"pool keepalive a boolean", withPool("keepalive = true #!\n"), "pool.web.keepalive", `must be "off" or a duration string`},
		{"pool keepalive_interval without keepalive", withPool("keepalive_interval = \"5s\" #!\n"), "pool.web.keepalive_interval", keepaliveOff + ` (keepalive left out means "off")`},
		{"pool keepalive_count with keepalive off", withPool("keepalive = \"off\"\nkeepalive_count = 3 #!\n"), "pool.web.keepalive_count", keepaliveOff},
		{"pool keepalive_count too high", withPool("keepalive = \"5s\"\nkeepalive_count = 200 #!\n"), "pool.web.keepalive_count", "must be between 0 and 127"},
		{"pool keepalive_interval not whole seconds", withPool("keepalive = \"5s\"\nkeepalive_interval = \"1.5s\" #!\n"), "pool.web.keepalive_interval", "is not a whole number of seconds"},
		{"misspelt queue_timeout", withPool("queue_timout = \"1s\" #!\n"), "pool.web.queue_timout", `did you mean "queue_timeout"?`},
		{"misspelt proxy_protocol", withPool("proxy_protocl = \"v2\" #!\n"), "pool.web.proxy_protocl", `did you mean "proxy_protocol"?`},

		// Backends.
		{"backend max_connections negative", withBackendKeys("max_connections = -1 #!\n"), "pool.web.backend[0].max_connections", "-1 is out of range: must be between 0 and 1000000"},
		{"backend max_connections too high", withBackendKeys("max_connections = 1000001 #!\n"), "pool.web.backend[0].max_connections", "1000001 is out of range: must be between 0 and 1000000"},
		{"backend max_connections a float", withBackendKeys("max_connections = 1.5 #!\n"), "pool.web.backend[0].max_connections", "must be an integer, not the float 1.5"},
		{"backend max_connections in a udp pool", listenerDNS + "[pool.dns]\n[[pool.dns.backend]]\naddr = \"127.0.0.1:9053\"\nmax_connections = -5 #!\n", "pool.dns.backend[0].max_connections", "out of range"},
		{"misspelt backend max_connections", withBackendKeys("max_conections = 5 #!\n"), "pool.web.backend[0].max_conections", `did you mean "max_connections"?`},

		// state_file.
		{"state_file not a string", withGlobal("state_file = true #!\n"), "global.state_file", "must be a string, not the boolean true"},
		{"state_file a directory", withGlobal("state_file = \"/var/lib/l4lb/\" #!\n"), "global.state_file", `"/var/lib/l4lb/" names a directory: name the file to keep runtime changes in`},
		{"state_file dot", withGlobal("state_file = \".\" #!\n"), "global.state_file", "names a directory"},
		{"state_file dot dot", withGlobal("state_file = \"/var/lib/l4lb/..\" #!\n"), "global.state_file", "names a directory"},
		{"state_file with a NUL", withGlobal("state_file = \"state\\u0000.json\" #!\n"), "global.state_file", "holds a NUL byte"},
		{"misspelt state_file", withGlobal("statefile = \"/x\" #!\n"), "global.statefile", `did you mean "state_file"?`},
	}
	for _, p := range tests {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, parseErrors(t, p.src)) })
	}
}

// Every problem of the traffic-policy keys is reported in one run, each at
// its own key.
func TestPolicyReportsEveryProblem(t *testing.T) {
	errs := parseErrors(t, `[global]
state_file = "/tmp/"
[[listener]]
name = "web"
bind = "127.0.0.1:8080"
pool = "web"
accept_proxy = true
trusted_proxies = ["10.0.0.1/8", "x"]
proxy_timeout = "1h"
allow = ["fe80::1%lo"]
deny = ["10.0.0.0/33"]
max_connections_per_source = -1
rate_per_source = -1
burst_per_source = -1
keepalive = "1ms"
keepalive_interval = "1ms"
keepalive_count = 300
[[listener]]
name = "dns"
bind = "127.0.0.1:5353"
protocol = "udp"
pool = "dns"
accept_proxy = true
keepalive = "60s"
[pool.web]
proxy_protocol = "v9"
queue_timeout = "2m"
keepalive = "on"
keepalive_count = 300
[[pool.web.backend]]
addr = "127.0.0.1:9001"
max_connections = -1
[pool.dns]
proxy_protocol = "v1"
queue_timeout = "1s"
[[pool.dns.backend]]
addr = "127.0.0.1:9053"
`)
	var keys []string
	for _, e := range errs {
		keys = append(keys, e.Key)
	}
	want := []string{
		"global.state_file",
		"listener[0].trusted_proxies[0]", "listener[0].trusted_proxies[1]", "listener[0].proxy_timeout",
		"listener[0].allow[0]", "listener[0].deny[0]", "listener[0].max_connections_per_source", "listener[0].rate_per_source",
		"listener[0].burst_per_source", "listener[0].keepalive", "listener[0].keepalive_interval", "listener[0].keepalive_count",
		"listener[1].accept_proxy", "listener[1].keepalive",
		"pool.web.proxy_protocol", "pool.web.queue_timeout", "pool.web.keepalive", "pool.web.keepalive_count",
		"pool.web.backend[0].max_connections",
		"pool.dns.proxy_protocol", "pool.dns.queue_timeout",
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys:\n got %v\nwant %v\n%v", keys, want, errs)
	}
}

func TestParsePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8":             "10.0.0.0/8",
		"192.0.2.7":              "192.0.2.7/32",
		"192.0.2.7/32":           "192.0.2.7/32",
		"0.0.0.0/0":              "0.0.0.0/0",
		"2001:db8::/32":          "2001:db8::/32",
		"2001:DB8:0::/48":        "2001:db8::/48",
		"2001:db8::7":            "2001:db8::7/128",
		"::/0":                   "::/0",
		"::":                     "::/128",
		"::ffff:10.0.0.0/104":    "10.0.0.0/8",
		"::ffff:0.0.0.0/96":      "0.0.0.0/0",
		"::ffff:192.0.2.7":       "192.0.2.7/32",
		"::ffff:192.0.2.7/128":   "192.0.2.7/32",
		"::ffff:c000:207":        "192.0.2.7/32",
		"64:ff9b::/96":           "64:ff9b::/96", // NAT64, not mapped
		"::ffff:0:0:0/96":        "::ffff:0:0:0/96",
		"fe80::/10":              "fe80::/10",
		"255.255.255.255":        "255.255.255.255/32",
		"224.0.0.0/4":            "224.0.0.0/4",
		"::ffff:10.0.0.0/128":    "10.0.0.0/32",
		"100.64.0.0/10":          "100.64.0.0/10",
		"2001:db8:1:2:3:4:5:6":   "2001:db8:1:2:3:4:5:6/128",
		"2001:db8::1:0:0:0/80":   "2001:db8:0:0:1::/80",
		"10.255.255.255/32":      "10.255.255.255/32",
		"::ffff:255.255.0.0/112": "255.255.0.0/16",
	} {
		p, err := parsePrefix(in)
		if err != nil || p.String() != want || p.Addr().Is4In6() || p != p.Masked() {
			t.Errorf("parsePrefix(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
}

// run must be able to keep runtime changes in state_file: check says so
// without creating anything.
func TestCheckHostStateFile(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "state.json")
	if err := os.WriteFile(existing, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	notWritable := filepath.Join(dir, "ro")
	if err := os.Mkdir(notWritable, 0o500); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(dir, "ro.json")
	if err := os.WriteFile(readOnly, []byte("{}"), 0o400); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	src := func(path string) string { return withGlobal("state_file = " + strconv.Quote(path) + " #!\n") }
	for _, ok := range []string{
		src(existing),
		src(filepath.Join(dir, "new.json")),
		withGlobal("state_file = \"\"\n"),
		validBase,
	} {
		if errs := hostErrors(t, ok); errs != nil {
			t.Errorf("%v\nsource:\n%s", errs, ok)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.json")); err == nil {
		t.Error("check created the state file")
	}
	tests := []problem{
		{"directory missing", src(filepath.Join(dir, "missing", "state.json")), "global.state_file",
			"cannot keep runtime changes in " + strconv.Quote(filepath.Join(dir, "missing", "state.json")) + ": directory " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"a directory", src(dir), "global.state_file", "is a directory: name the file to keep runtime changes in"},
		{"a fifo", src(fifo), "global.state_file", "is not a regular file"},
		{"under a file", src(filepath.Join(existing, "state.json")), "global.state_file", "cannot use the state file"},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		tests = append(tests,
			problem{"directory not writable", src(filepath.Join(notWritable, "state.json")), "global.state_file", "permission denied"},
			problem{"file not writable", src(readOnly), "global.state_file", "cannot read and write the state file"},
		)
	}
	for _, p := range tests {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, hostErrors(t, p.src)) })
	}
}
