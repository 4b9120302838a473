package config

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// Test sources for UDP: listener dns (lines 1-5) in front of pool dns.
const (
	listenerDNS = "[[listener]]\nname = \"dns\"\nbind = \"127.0.0.1:5353\"\nprotocol = \"udp\"\npool = \"dns\"\n"
	poolDNS     = "[pool.dns]\n[[pool.dns.backend]]\naddr = \"127.0.0.1:9053\"\n"
	validUDP    = listenerDNS + poolDNS
)

// withUDPListener is a valid file whose only listener, dns, is a UDP one
// with the given further keys (from line 6).
func withUDPListener(keys string) string { return listenerDNS + keys + poolDNS }

// withUDPPool is a valid file whose UDP pool dns has the given keys (from
// line 7) and one backend.
func withUDPPool(keys string) string {
	return listenerDNS + "[pool.dns]\n" + keys + "[[pool.dns.backend]]\naddr = \"127.0.0.1:9053\"\n"
}

// listenerOn is one [[listener]] table.
func listenerOn(name, bind, protocol, pool string) string {
	return fmt.Sprintf("[[listener]]\nname = %q\nbind = %s\nprotocol = %q\npool = %q\n", name, bind, protocol, pool)
}

// poolOf is one [pool.NAME] table with the given backend addresses.
func poolOf(name string, backends ...string) string {
	s := "[pool." + name + "]\n"
	for _, a := range backends {
		s += "[[pool." + name + ".backend]]\naddr = " + a + "\n"
	}
	return s
}

// TestParseReportsEachUDPProblem: every UDP rule, one problem per case,
// each on its key and line.
func TestParseReportsEachUDPProblem(t *testing.T) {
	tcpListener := func(keys string) string {
		return withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n" + keys)
	}
	tcpExplicit := func(keys string) string {
		return withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"tcp\"\npool = \"web\"\n" + keys)
	}
	const onlyUDP = `only for protocol = "udp" listeners, and this listener is tcp`
	const udpPool = `is for TCP pools, and this pool serves udp listener[0] "dns" (line 1): `
	const tcpPool = `is for UDP pools, and this pool serves tcp listener[0] "web" (line 1): `
	const onlySendExpect = `only for type = "send-expect" checks: a connect check sends and reads nothing`
	tests := []problem{
		// Listener keys of the other protocol.
		{"backlog on a udp listener", withUDPListener("backlog = 128 #!\n"), "listener[0].backlog", `only for protocol = "tcp" listeners: a UDP socket has no listen backlog`},
		{"session_timeout on a listener without protocol", tcpListener("session_timeout = \"5s\" #!\n"), "listener[0].session_timeout", onlyUDP + ` (protocol left out means "tcp")`},
		{"session_timeout on a tcp listener", tcpExplicit("session_timeout = \"5s\" #!\n"), "listener[0].session_timeout", onlyUDP},
		{"max_sessions on a tcp listener", tcpExplicit("max_sessions = 10 #!\n"), "listener[0].max_sessions", onlyUDP},
		{"responses on a tcp listener", tcpListener("responses = 1 #!\n"), "listener[0].responses", onlyUDP},
		{"requests on a tcp listener", tcpListener("requests = 1 #!\n"), "listener[0].requests", onlyUDP},
		{"a bad value where the key does not apply is reported once", tcpListener("session_timeout = \"0s\" #!\n"), "listener[0].session_timeout", onlyUDP},
		{"an unknown protocol is reported alone", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"sctp\" #!\npool = \"web\"\nsession_timeout = \"5s\"\nbacklog = 5\n"), "listener[0].protocol", `unknown protocol "sctp"; use "tcp" or "udp"`},
		{"protocol written as a number", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = 17 #!\npool = \"web\"\nsession_timeout = \"5s\"\n"), "listener[0].protocol", "must be a string, not the integer 17"},

		// Listener values.
		{"zero session timeout", withUDPListener("session_timeout = \"0s\" #!\n"), "listener[0].session_timeout", "0s is out of range: must be"},
		{"negative session timeout", withUDPListener("session_timeout = \"-1s\" #!\n"), "listener[0].session_timeout", `"-1s" is negative`},
		{"session timeout as a number", withUDPListener("session_timeout = 60 #!\n"), "listener[0].session_timeout", `must be a duration string such as "2s", not the integer 60`},
		{"zero max sessions", withUDPListener("max_sessions = 0 #!\n"), "listener[0].max_sessions", "0 is out of range: must be between 1 and 1000000"},
		{"too many max sessions", withUDPListener("max_sessions = 1000001 #!\n"), "listener[0].max_sessions", "1000001 is out of range: must be between 1 and 1000000"},
		{"negative responses", withUDPListener("responses = -1 #!\n"), "listener[0].responses", "-1 is out of range: must be at least 0"},
		{"responses as a string", withUDPListener("responses = \"1\" #!\n"), "listener[0].responses", `must be an integer, not the string "1"`},
		{"negative requests", withUDPListener("requests = -2 #!\n"), "listener[0].requests", "-2 is out of range: must be at least 0"},
		{"unknown key in a udp listener", withUDPListener("session_timout = \"5s\" #!\n"), "listener[0].session_timout", `did you mean "session_timeout"?`},

		// One protocol per pool.
		{"a pool named by a tcp and a udp listener", validBase + "[[listener]]\nname = \"u\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"udp\"\npool = \"web\" #!\n", "listener[1].pool",
			`pool "web" is also served by tcp listener[0] "web" (line 1), and this listener is udp: a pool serves one protocol: define a second pool with the same backends`},
		{"a pool named by a udp and a tcp listener", validUDP + "[[listener]]\nname = \"t\"\nbind = \"127.0.0.1:5353\"\npool = \"dns\" #!\n", "listener[1].pool",
			`pool "dns" is also served by udp listener[0] "dns" (line 1), and this listener is tcp: a pool serves one protocol`},
		{"keys of either protocol are not judged in a pool of both", listenerWeb + "[[listener]]\nname = \"u\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"udp\"\npool = \"web\" #!\n[pool.web]\nconnect_timeout = \"1s\"\nreply_timeout = \"1s\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n[pool.web.breaker]\ncount_early_reset = true\ncount_no_reply = true\n",
			"listener[1].pool", "a pool serves one protocol"},

		// Pool keys of the other protocol.
		{"reply_timeout in a tcp pool", withPool("reply_timeout = \"1s\" #!\n"), "pool.web.reply_timeout", "reply_timeout " + tcpPool + "a TCP dial is judged at its connect (connect_timeout)"},
		{"reply_timeout in a pool no listener names", validBase + "[pool.spare]\nreply_timeout = \"1s\" #!\n[[pool.spare.backend]]\naddr = \"127.0.0.1:9002\"\n", "pool.spare.reply_timeout",
			"reply_timeout is for UDP pools, and no listener names this pool, so it is a TCP pool"},
		{"count_no_reply in a tcp pool", validBase + "[pool.web.breaker]\ncount_no_reply = true #!\n", "pool.web.breaker.count_no_reply", "count_no_reply " + tcpPool},
		{"count_no_reply false is still a udp key", validBase + "[pool.web.breaker]\ncount_no_reply = false #!\n", "pool.web.breaker.count_no_reply", "count_no_reply " + tcpPool},
		{"connect_timeout in a udp pool", withUDPPool("connect_timeout = \"1s\" #!\n"), "pool.dns.connect_timeout", "connect_timeout " + udpPool + "a UDP session's first datagram waits reply_timeout for its reply instead"},
		{"connect_budget in a udp pool", withUDPPool("connect_budget = \"5s\" #!\n"), "pool.dns.connect_budget", "connect_budget " + udpPool + "a UDP session's first datagram waits reply_timeout"},
		{"idle_timeout in a udp pool", withUDPPool("idle_timeout = \"10m\" #!\n"), "pool.dns.idle_timeout", "idle_timeout " + udpPool + "UDP sessions end after the listener's session_timeout"},
		{"count_early_reset in a udp pool", validUDP + "[pool.dns.breaker]\ncount_early_reset = false #!\n", "pool.dns.breaker.count_early_reset", "count_early_reset " + udpPool + "UDP has no connection to reset"},
		{"early_reset_window in a udp pool", validUDP + "[pool.dns.breaker]\nearly_reset_window = \"5s\" #!\n", "pool.dns.breaker.early_reset_window", "early_reset_window " + udpPool},
		{"a dotted tcp key in a udp pool", withUDPPool("breaker.count_early_reset = true #!\n"), "pool.dns.breaker.count_early_reset", "count_early_reset " + udpPool},
		{"a bad tcp value in a udp pool is reported once", withUDPPool("connect_timeout = \"0s\" #!\n"), "pool.dns.connect_timeout", "connect_timeout " + udpPool},

		// UDP pool values.
		{"zero reply timeout", withUDPPool("reply_timeout = \"0s\" #!\n"), "pool.dns.reply_timeout", "0s is out of range: must be"},
		{"reply timeout without unit", withUDPPool("reply_timeout = \"2\" #!\n"), "pool.dns.reply_timeout", `"2" is not a duration`},
		{"count_no_reply as a string", validUDP + "[pool.dns.breaker]\ncount_no_reply = \"yes\" #!\n", "pool.dns.breaker.count_no_reply", `must be true or false, not the string "yes"`},

		// Health.
		{"unknown health type", validBase + "[pool.web.health]\ntype = \"http\" #!\n", "pool.web.health.type", `"http" is not a health check type; use one of: connect, send-expect`},
		{"health type as a boolean", validBase + "[pool.web.health]\ntype = true #!\n", "pool.web.health.type", "must be a string, not the boolean true"},
		{"health port out of range", validBase + "[pool.web.health]\nport = 65536 #!\n", "pool.web.health.port", "65536 is out of range: must be between 0 and 65535"},
		{"negative health port", validUDP + "[pool.dns.health]\nport = -1 #!\n", "pool.dns.health.port", "-1 is out of range: must be between 0 and 65535"},
		{"icmp checks on a tcp pool", validBase + "[pool.web.health]\ntype = \"icmp\" #!\n", "pool.web.health.type", `"icmp" checks are for UDP pools`},
		{"health port with send-expect", validBase + "[pool.web.health]\ntype = \"send-expect\"\nport = 8081 #!\n", "pool.web.health.port", `only for type = "connect" or "tls" checks: a send-expect check talks to the backend's own address`},
		{"send with a connect check", validBase + "[pool.web.health]\ntype = \"connect\"\nsend = \"ping\" #!\n", "pool.web.health.send", onlySendExpect},
		{"send with the default type", validBase + "[pool.web.health]\nsend = \"ping\" #!\n", "pool.web.health.send", onlySendExpect},
		{"send_hex with a connect check", validUDP + "[pool.dns.health]\nsend_hex = \"00\" #!\n", "pool.dns.health.send_hex", onlySendExpect},
		{"expect with a connect check", validBase + "[pool.web.health]\nexpect = \"+PONG\" #!\n", "pool.web.health.expect", onlySendExpect},
		{"expect_hex with a connect check", validBase + "[pool.web.health]\nexpect_hex = \"2b\" #!\n", "pool.web.health.expect_hex", onlySendExpect},
		{"send beside send_hex", validBase + "[pool.web.health]\ntype = \"send-expect\"\nsend = \"ping\"\nsend_hex = \"70696e67\" #!\n", "pool.web.health.send_hex",
			"set beside send: send and send_hex are two ways to write the same bytes; keep one"},
		{"expect_hex beside expect", validBase + "[pool.web.health]\ntype = \"send-expect\"\nexpect_hex = \"70\" #!\nexpect = \"p\"\n", "pool.web.health.expect_hex",
			"set beside expect: expect and expect_hex are two ways to write the same bytes"},
		{"send_hex not hex", validBase + "[pool.web.health]\ntype = \"send-expect\"\nsend_hex = \"zz\" #!\n", "pool.web.health.send_hex", `"zz" is not hex bytes (invalid byte`},
		{"expect_hex of odd length", validBase + "[pool.web.health]\ntype = \"send-expect\"\nexpect_hex = \"abc\" #!\n", "pool.web.health.expect_hex", `"abc" is not hex bytes (odd length hex string): write two hex digits per byte`},
		{"hex with spaces", validBase + "[pool.web.health]\ntype = \"send-expect\"\nsend_hex = \"70 69\" #!\n", "pool.web.health.send_hex", "is not hex bytes"},
		{"send as a number", validBase + "[pool.web.health]\ntype = \"send-expect\"\nsend = 1 #!\n", "pool.web.health.send", "must be a string, not the integer 1"},
		{"udp send-expect with nothing to send", validUDP + "[pool.dns.health]\ntype = \"send-expect\" #!\nexpect = \"x\"\n", "pool.dns.health.type",
			"a send-expect check of a UDP pool needs bytes to send (send or send_hex): a UDP backend only answers what it receives"},
		{"udp send-expect with an empty send", validUDP + "[pool.dns.health]\ntype = \"send-expect\"\nsend = \"\" #!\n", "pool.dns.health.send", "needs bytes to send"},
		{"udp send-expect with an empty send_hex", validUDP + "[pool.dns.health]\ntype = \"send-expect\"\nsend_hex = \"\" #!\n", "pool.dns.health.send_hex", "needs bytes to send"},
		{"unknown key in health", validBase + "[pool.web.health]\nsend_hexa = \"00\" #!\n", "pool.web.health.send_hexa", `did you mean "send_hex"?`},

		// Binds: within one protocol, as for TCP.
		{"two udp listeners on one bind", validUDP + listenerOn("dns2", `"127.0.0.1:5353" #!`, "udp", "dns"), "listener[1].bind",
			`duplicate bind "127.0.0.1:5353": listener[0] (line 1) already listens on 127.0.0.1:5353`},
		{"udp wildcard then specific", listenerOn("a", `"0.0.0.0:53"`, "udp", "dns") + listenerOn("b", `"127.0.0.1:53" #!`, "udp", "dns") + poolDNS, "listener[1].bind",
			"0.0.0.0:53 already takes port 53 on every local IPv4 address"},
		{"udp IPv6 wildcard then loopback", listenerOn("a", `"[::]:53"`, "udp", "dns") + listenerOn("b", `"[::1]:53" #!`, "udp", "dns") + poolDNS, "listener[1].bind",
			"[::]:53 already takes port 53 on every local IPv6 address"},
		{"udp collides with the udp listener, not the tcp one between", listenerOn("a", `"0.0.0.0:53"`, "udp", "dns") + listenerOn("t", `"127.0.0.1:53"`, "tcp", "web") + listenerOn("b", `"127.0.0.1:53" #!`, "udp", "dns") + poolDNS + poolWeb,
			"listener[2].bind", `collides with listener[0] "0.0.0.0:53" (line 1)`},

		// Self-dials: within one protocol.
		{"udp backend that is the udp listener", listenerDNS + poolOf("dns", `"127.0.0.1:5353" #!`), "pool.dns.backend[0].addr",
			`backend "127.0.0.1:5353" is the address of listener[0] "dns" (bind "127.0.0.1:5353", line 1): l4lb would send to itself, in a loop, for every datagram`},
		{"udp loopback backend under a udp wildcard", listenerOn("dns", `"0.0.0.0:53"`, "udp", "dns") + poolOf("dns", `"127.0.0.1:53" #!`), "pool.dns.backend[0].addr",
			"is a loopback address, where listener[0]"},
		{"udp backend that is another udp pool's listener", validUDP + listenerOn("b", `"127.0.0.1:5354"`, "udp", "b") + poolOf("b", `"127.0.0.1:5353" #!`), "pool.b.backend[0].addr",
			"l4lb would send to itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, parseErrors(t, tt.src)) })
	}
}

// TestParseAcceptsUDP covers what UDP makes valid: both protocols on one
// address, the admin endpoint beside UDP listeners, backends at addresses
// of the other protocol's listeners, and the edge values.
func TestParseAcceptsUDP(t *testing.T) {
	tests := []struct{ name, src string }{
		{"udp listener with defaults", validUDP},
		{"tcp and udp on one address and port", validBase + listenerOn("u", `"127.0.0.1:8080"`, "udp", "dns") + poolDNS},
		{"udp wildcard beside a tcp address on its port", validBase + listenerOn("u", `"0.0.0.0:8080"`, "udp", "dns") + poolDNS},
		{"tcp wildcard beside a udp address on its port", validUDP + listenerOn("t", `"0.0.0.0:5353"`, "tcp", "web") + poolWeb},
		{"both udp wildcards", listenerOn("a", `"0.0.0.0:53"`, "udp", "dns") + listenerOn("b", `"[::]:53"`, "udp", "dns") + poolDNS},
		{"udp on the admin endpoint's address", listenerOn("u", `"127.0.0.1:9090"`, "udp", "dns") + poolDNS},
		{"udp wildcard on the admin endpoint's port", listenerOn("u", `"0.0.0.0:9090"`, "udp", "dns") + poolDNS},
		{"udp backend at a tcp listener's address", validBase + listenerOn("u", `"127.0.0.1:5353"`, "udp", "dns") + poolOf("dns", `"127.0.0.1:8080"`)},
		{"tcp backend at a udp listener's address", validUDP + listenerOn("t", `"127.0.0.1:8080"`, "tcp", "web") + poolOf("web", `"127.0.0.1:5353"`)},
		{"udp backend at the admin endpoint's address", listenerDNS + poolOf("dns", `"127.0.0.1:9090"`)},
		{"udp loopback backend under a tcp wildcard", listenerOn("t", `"0.0.0.0:53"`, "tcp", "web") + poolOf("web", `"127.0.0.1:9001"`) + listenerOn("u", `"127.0.0.1:5353"`, "udp", "dns") + poolOf("dns", `"127.0.0.1:53"`)},
		{"two udp listeners on one pool", validUDP + listenerOn("dns6", `"[::1]:5353"`, "udp", "dns")},
		{"every udp key", withUDPListener("session_timeout = \"100ms\"\nmax_sessions = 1\nresponses = 0\nrequests = 0\n")},
		{"most sessions", withUDPListener("max_sessions = 1000000\n")},
		{"udp pool keys", withUDPPool("reply_timeout = \"30s\"\nretries = 0\nslow_start = \"10s\"\nalgorithm = \"maglev\"\nhash_key = \"source-ip-port\"\n") + "[pool.dns.breaker]\ncount_no_reply = false\n"},
		{"udp pool with a connect check on a port", validUDP + "[pool.dns.health]\ntype = \"connect\"\nport = 53\n"},
		{"udp pool with port 65535 and 0", validUDP + "[pool.dns.health]\nport = 65535\n" + "[pool.spare]\n[[pool.spare.backend]]\naddr = \"127.0.0.1:1\"\n[pool.spare.health]\nport = 0\n"},
		{"tcp pool with a connect check on another port", validBase + "[pool.web.health]\nport = 8081\n"},
		{"tcp send-expect with nothing to send reads a banner", validBase + "[pool.web.health]\ntype = \"send-expect\"\nexpect = \"220 \"\n"},
		{"tcp send-expect expecting anything", validBase + "[pool.web.health]\ntype = \"send-expect\"\n"},
		{"send-expect with hex", validUDP + "[pool.dns.health]\ntype = \"send-expect\"\nsend_hex = \"DEADbeef\"\nexpect_hex = \"\"\n"},
		{"send-expect with health off", validUDP + "[pool.dns.health]\nenabled = false\ntype = \"send-expect\"\nsend = \"x\"\n"},
		{"tcp pool with the tcp keys", withPool("connect_timeout = \"1s\"\nconnect_budget = \"2s\"\nidle_timeout = \"1m\"\n") + "[pool.web.breaker]\ncount_early_reset = true\nearly_reset_window = \"1s\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustParse(t, tt.src) })
	}
}

// TestUDPListenerDefaults checks a UDP listener's keys, left out, take the
// defaults of docs/configuration.md (literals, so a changed default fails
// here).
func TestUDPListenerDefaults(t *testing.T) {
	cfg := mustParse(t, validUDP)
	want := Listener{Name: "dns", Bind: "127.0.0.1:5353", Protocol: "udp", Pool: "dns", Line: 1,
		SessionTimeout: 60 * time.Second, MaxSessions: 4096, Responses: 0, Requests: 0, ProxyTimeout: 3 * time.Second, SourceIPv4Prefix: 32, SourceIPv6Prefix: 64,
		InspectTimeout: 5 * time.Second, OnUnrecognized: "fallback", OnTooLarge: "fallback", AccessLog: true}
	if got := cfg.Listeners[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("listener = %+v\nwant       %+v", got, want)
	}
	p := cfg.Pools["dns"]
	if p.Protocol != "udp" || p.ReplyTimeout != 2*time.Second || p.Breaker.CountNoReply || p.Health.Type != "icmp" || p.Health.Port != 0 {
		t.Errorf("pool = %+v, want a udp pool with reply_timeout 2s, count_no_reply false, icmp checks", *p)
	}
	// A health port without a type is a connect check on it; an explicit
	// type stays.
	for src, want := range map[string]string{
		validUDP + "[pool.dns.health]\nport = 53\n":          HealthConnect,
		validUDP + "[pool.dns.health]\ninterval = \"5s\"\n":  HealthICMP,
		validUDP + "[pool.dns.health]\ntype = \"connect\"\n": HealthConnect,
		validBase + "[pool.web.health]\ninterval = \"5s\"\n": HealthConnect,
	} {
		cfg := mustParse(t, src)
		for _, p := range cfg.Pools {
			if p.Health.Type != want {
				t.Errorf("%s\n-> pool %s health type %q, want %q", src, p.Name, p.Health.Type, want)
			}
		}
	}
}

// TestPoolProtocolComesFromItsListeners: a pool serves the protocol of the
// listeners naming it, TCP when none does.
func TestPoolProtocolComesFromItsListeners(t *testing.T) {
	src := validBase + validUDP + listenerOn("dns6", `"[::1]:5353"`, "udp", "dns") + "[pool.spare]\n[[pool.spare.backend]]\naddr = \"127.0.0.1:1\"\n"
	cfg := mustParse(t, src)
	for name, want := range map[string]string{"web": "tcp", "dns": "udp", "spare": "tcp"} {
		if got := cfg.Pools[name].Protocol; got != want {
			t.Errorf("pool %s protocol = %q, want %q", name, got, want)
		}
	}
}

// TestHealthBytes checks send/send_hex and expect/expect_hex arrive
// decoded, and that empty means none.
func TestHealthBytes(t *testing.T) {
	tests := []struct {
		name         string
		keys         string
		send, expect []byte
	}{
		{"text", "send = \"ping\\n\"\nexpect = \"pong\"\n", []byte("ping\n"), []byte("pong")},
		{"hex", "send_hex = \"00ff10\"\nexpect_hex = \"ABCD\"\n", []byte{0, 0xff, 0x10}, []byte{0xab, 0xcd}},
		{"mixed", "send_hex = \"0a\"\nexpect = \"ok\"\n", []byte{0x0a}, []byte("ok")},
		{"expect left out: any reply", "send = \"x\"\n", []byte("x"), nil},
		{"empty expect: any reply", "send = \"x\"\nexpect = \"\"\n", []byte("x"), nil},
		{"bytes that are not UTF-8 by escape", "send = \"\\u00ff\"\n", []byte("\u00ff"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustParse(t, validUDP+"[pool.dns.health]\ntype = \"send-expect\"\n"+tt.keys).Pools["dns"].Health
			if h.Type != HealthSendExpect || !bytes.Equal(h.Send, tt.send) || !bytes.Equal(h.Expect, tt.expect) || (tt.expect == nil) != (h.Expect == nil) {
				t.Errorf("health = type %q send %q expect %q, want send-expect %q %q", h.Type, h.Send, h.Expect, tt.send, tt.expect)
			}
		})
	}
}
