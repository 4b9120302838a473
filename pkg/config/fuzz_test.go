package config

import (
	"errors"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics and keeps its contract on any
// input: either a Config that satisfies the cross-table rules, or a
// non-empty Errors, sorted by line, whose every entry says something.
func FuzzParse(f *testing.F) {
	if ref, err := os.ReadFile(referencePath); err == nil {
		f.Add(ref)
	}
	for _, seed := range []string{
		validBase,
		"",
		"[global",
		"[[listener]]\nname = \"a\"\nbind = \"[::1]:1\"\npool = \"p\"\n[pool.p]\nbackend = [{addr = \"[::1]:2\", id = \"x\"}]\n",
		"[pool.\"a.b\"]\nhealth.rise = 0\n'q' = \"\"\"\n[x]\n\"\"\"\n",
		"listener = [1, {name = 2}]\npool = {a = {backend = [[]]}}\n",
		"t = 1979-05-27 07:32:00Z\n[[a.b]]\n[[a]]\n[a.b]\n",
		"[[listener]]\nbind = \"::1:80\"\n[pool.web]\nmaglev_table_size = 4\nhash_balance_factor = nan\n",
		"[pool.web.breaker]\ncooldown = \"10m\"\n[pool.web.health]\ninterval = \"1ms\"\n",
		listeners([]string{`"0.0.0.0:80"`, `"[::]:80"`, `"127.0.0.1:80"`}, `"127.0.0.1:80"`, `"[::1]:81"`),
		"[[listener]]\nname = \"a\"\nbind = \"[::]:1\"\npool = \"p\"\n[pool.p]\nalgorithm = \"consistent-hash\"\nring_vnodes = 9000\nbackend = [{addr = \"300.1.2.3:1\", weight = 0}, {addr = \"[::1]:1\", weight = 256}]\n",
		validUDP + listenerOn("t", `"0.0.0.0:5353"`, "tcp", "web") + poolOf("web", `"127.0.0.1:5353"`) + "[pool.dns.health]\ntype = \"send-expect\"\nsend_hex = \"00\"\n",
		validBase + "[cluster]\nstore = \"redis\"\nredis_url = \"rediss://u:p@h:1/2\"\nsentinel_master = \"m\"\nsentinel_addrs = [\"h:2\", \"[::1]:3\"]\nkey_prefix = \"l4lb:\"\nsync_interval = \"1s\"\ntimeout = \"999ms\"\ninstance = \"i\"\ntls_cert_file = \"c\"\ntls_key_file = \"k\"\n",
		validBase + "[cluster]\nstore = \"memory\"\ntimeout = \"1s\"\nsentinel_addrs = [1, \"h\"]\nkey_prefix = \"{\"\nredis_url = \"unix://h/?db=x#y\"\n",
		listenerOn("u", `"0.0.0.0:80"`, "udp", "p") + listenerOn("t", `"127.0.0.1:80"`, "tcp", "p") + "[pool.p]\nreply_timeout = \"1s\"\nidle_timeout = \"1s\"\nbackend = [{addr = \"127.0.0.1:80\"}]\n[pool.p.health]\nsend = \"a\"\nsend_hex = \"zz\"\n",
		// Traffic policy (issue 14): every key, valid, then every key wrong.
		"[global]\nstate_file = \"/var/lib/l4lb/state.json\"\n" + listenerWeb + "accept_proxy = true\ntrusted_proxies = [\"10.0.0.0/8\", \"::ffff:192.0.2.0/120\", \"2001:db8::7\"]\nproxy_timeout = \"250ms\"\n" +
			"allow = [\"0.0.0.0/0\", \"::/0\"]\ndeny = [\"192.0.2.7\"]\nmax_connections_per_source = 10\nrate_per_source = 0.5\nburst_per_source = 3\nkeepalive = \"60s\"\nkeepalive_interval = \"10s\"\nkeepalive_count = 5\n" +
			"[pool.web]\nproxy_protocol = \"v1\"\nqueue_timeout = \"1s\"\nkeepalive = \"2h\"\nkeepalive_count = 127\n[[pool.web.backend]]\naddr = \"127.0.0.2:1\"\nmax_connections = 5\n" +
			listenerOn("u", `"127.0.0.1:53"`, "udp", "u") + "allow = [\"10.0.0.0/8\"]\n[pool.u]\nproxy_protocol = \"v2\"\nbackend = [{addr = \"127.0.0.1:9053\", max_connections = 1}]\n",
		"[global]\nstate_file = \"/x/\"\n" + listenerWeb + "trusted_proxies = [\"10.0.0.1/8\", \"fe80::1%eth0\", 1]\nproxy_timeout = \"1h\"\nallow = [\"::ffff:10.0.0.1/104\", \"10.0.0.0/33\", \"\"]\n" +
			"deny = \"x\"\nburst_per_source = -1\nrate_per_source = nan\nkeepalive = \"1500ms\"\nkeepalive_interval = \"0s\"\nkeepalive_count = 128\n" + poolWeb +
			listenerOn("u", `"127.0.0.1:53"`, "udp", "u") + "accept_proxy = true\nkeepalive = \"off\"\n[pool.u]\nproxy_protocol = \"v1\"\nqueue_timeout = \"1s\"\nkeepalive_count = 1\nbackend = [{addr = \"127.0.0.1:9053\", max_connections = -1}]\n",
		// TLS routes (issue 29): valid, then wrong in every way.
		listenerWeb + "inspect_timeout = \"1s\"\non_unrecognized = \"reset\"\n[[listener.route]]\nsni = [\"A.example.com.\", \"*.example.com\"]\nalpn = [\"h2\"]\npool = \"api\"\n" +
			"[[listener.route]]\nsni = [\"a.example.com\"]\npool = \"web\"\n" + poolWeb + "[pool.api]\nhash_key = \"sni\"\nbackend = [{addr = \"127.0.0.1:9002\"}]\n",
		listenerWeb + "on_too_large = \"x\"\nroute = [{sni = [\"*\", \"a.*.b\", \"1.2.3.4\", \"\"], alpn = [\"\"]}, {sni = [], pool = \"dns\"}, {pool = 1}]\n" + poolWeb + validUDP,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.toml", data)
		if err != nil {
			if cfg != nil {
				t.Fatal("Config returned with an error")
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			for i, e := range errs {
				if e.Msg == "" || e.File != "fuzz.toml" || e.Line < 0 {
					t.Fatalf("malformed error %#v", e)
				}
				if i > 0 && e.Line != 0 && (errs[i-1].Line == 0 || errs[i-1].Line > e.Line) {
					t.Fatalf("errors not sorted by line: %v", errs)
				}
			}
			return
		}
		if len(cfg.Listeners) == 0 {
			t.Fatal("a valid Config has no listener")
		}
		for _, l := range cfg.Listeners {
			if cfg.Pools[l.Pool] == nil {
				t.Fatalf("listener %q names missing pool %q", l.Name, l.Pool)
			}
			for _, r := range l.Routes {
				if p := cfg.Pools[r.Pool]; p == nil || p.Protocol != ProtocolTCP || l.Protocol != ProtocolTCP {
					t.Fatalf("listener %q: route to pool %q accepted", l.Name, r.Pool)
				}
			}
			if _, err := l.RouteMatcher(); err != nil {
				t.Fatalf("listener %q: routes accepted that sniroute refuses: %v", l.Name, err)
			}
		}
		if len(cfg.PoolNames) != len(cfg.Pools) {
			t.Fatalf("PoolNames %v does not match Pools", cfg.PoolNames)
		}
		binds := map[string][]netip.AddrPort{} // by protocol
		for _, l := range cfg.Listeners {
			ap, err := parseAddr(l.Bind, roleListen)
			if err != nil {
				t.Fatalf("listener %q: bad bind accepted: %v", l.Name, err)
			}
			if l.Protocol != ProtocolTCP && l.Protocol != ProtocolUDP {
				t.Fatalf("listener %q: protocol %q accepted", l.Name, l.Protocol)
			}
			if p := cfg.Pools[l.Pool]; p.Protocol != l.Protocol {
				t.Fatalf("%s listener %q serves %s pool %q", l.Protocol, l.Name, p.Protocol, p.Name)
			}
			for _, other := range binds[l.Protocol] {
				if bindsCollide(ap, other) {
					t.Fatalf("colliding %s binds %s and %s accepted", l.Protocol, ap, other)
				}
			}
			binds[l.Protocol] = append(binds[l.Protocol], ap)
		}
		if cl := cfg.Cluster; cl.Store == StoreMemory {
			if !reflect.DeepEqual(cl, Cluster{Store: StoreMemory, KeyPrefix: DefaultCluster().KeyPrefix, SyncInterval: DefaultCluster().SyncInterval,
				Timeout: DefaultCluster().Timeout, Instance: cl.Instance, TripQuorum: DefaultCluster().TripQuorum}) {
				t.Fatalf("memory store accepted with redis settings: %+v", cl)
			}
		} else if cl.Store != StoreRedis || cl.RedisURL == "" || cl.KeyPrefix == "" || strings.ContainsAny(cl.KeyPrefix, "{}") ||
			cl.SyncInterval < MinSyncInterval || cl.SyncInterval > MaxSyncInterval || cl.Timeout < MinStoreTimeout || cl.Timeout >= cl.SyncInterval ||
			(cl.TLSCertFile == "") != (cl.TLSKeyFile == "") || len(cl.SentinelAddrs) > 0 && cl.SentinelMaster == "" {
			t.Fatalf("invalid [cluster] accepted: %+v", cl)
		}
		checkPolicy(t, cfg)
		for _, p := range cfg.Pools {
			if len(p.Backends) == 0 || !isPrime(p.MaglevTableSize) || p.MaglevTableSize < len(p.Backends) {
				t.Fatalf("invalid pool accepted: %+v", *p)
			}
			weight := 0
			for _, b := range p.Backends {
				weight += b.Weight
				ap, err := parseAddr(b.Addr, roleDial)
				if err != nil {
					t.Fatalf("pool %s: bad backend accepted: %v", p.Name, err)
				}
				for _, bind := range binds[p.Protocol] {
					if dialReaches(bind, ap, isLoopback) {
						t.Fatalf("pool %s: backend %s is l4lb's own %s", p.Name, ap, bind)
					}
				}
			}
			if p.Health.Type != HealthSendExpect && (p.Health.Send != nil || p.Health.Expect != nil) {
				t.Fatalf("pool %s: bytes to send or expect accepted for a %s check", p.Name, p.Health.Type)
			}
			if weight == 0 {
				t.Fatalf("pool %s accepted with every weight 0", p.Name)
			}
			if p.Algorithm == AlgorithmConsistentHash && weight*p.RingVnodes > MaxRingPoints {
				t.Fatalf("pool %s: ring of %d points accepted", p.Name, weight*p.RingVnodes)
			}
		}
	})
}

// checkPolicy checks the traffic-policy keys (issue 14) of a Config Parse
// accepted: every value in range, client networks canonical, and nothing
// set that its protocol or the key it depends on rules out.
func checkPolicy(t *testing.T, cfg *Config) {
	t.Helper()
	canonical := func(what string, ps []netip.Prefix) {
		if ps != nil && len(ps) == 0 {
			t.Fatalf("%s: empty but not nil", what)
		}
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("%s: %v accepted", what, p)
			}
		}
	}
	keepalive := func(what string, idle, interval time.Duration, count int) {
		whole := func(d time.Duration) bool { return d%time.Second == 0 }
		if idle != 0 && (idle < MinKeepalive || idle > MaxKeepalive || !whole(idle)) ||
			interval != 0 && (idle == 0 || interval < MinKeepaliveInterval || interval > MaxKeepaliveInterval || !whole(interval)) ||
			count != 0 && (idle == 0 || count < 0 || count > MaxKeepaliveCount) {
			t.Fatalf("%s: keepalive %v interval %v count %d accepted", what, idle, interval, count)
		}
	}
	if strings.HasSuffix(cfg.Global.StateFile, "/") {
		t.Fatalf("state_file %q accepted", cfg.Global.StateFile)
	}
	for _, l := range cfg.Listeners {
		what := "listener " + l.Name
		canonical(what+" allow", l.Allow)
		canonical(what+" deny", l.Deny)
		canonical(what+" trusted_proxies", l.TrustedProxies)
		if l.AcceptProxy != (len(l.TrustedProxies) > 0) {
			t.Fatalf("%s: accept_proxy %v with trusted_proxies %v", what, l.AcceptProxy, l.TrustedProxies)
		}
		if l.ProxyTimeout < MinProxyTimeout || l.ProxyTimeout > MaxProxyTimeout || !l.AcceptProxy && l.ProxyTimeout != DefaultProxyTimeout {
			t.Fatalf("%s: proxy_timeout %v accepted", what, l.ProxyTimeout)
		}
		if l.MaxConnsPerSource < 0 || l.MaxConnsPerSource > MaxConnectionsPerSource || l.RatePerSource < 0 || l.RatePerSource > MaxRatePerSource ||
			l.BurstPerSource < 0 || l.RatePerSource == 0 && l.BurstPerSource != 0 {
			t.Fatalf("%s: per-source limits %d %v %d accepted", what, l.MaxConnsPerSource, l.RatePerSource, l.BurstPerSource)
		}
		keepalive(what, l.Keepalive, l.KeepaliveInterval, l.KeepaliveCount)
		if l.Protocol == ProtocolUDP && (l.AcceptProxy || l.MaxConnsPerSource != 0 || l.RatePerSource != 0 || l.Keepalive != 0) {
			t.Fatalf("%s: tcp keys accepted on a udp listener: %+v", what, l)
		}
	}
	for _, p := range cfg.Pools {
		what := "pool " + p.Name
		if !slices.Contains(ProxyProtocols(), p.ProxyProtocol) || p.QueueTimeout < 0 || p.QueueTimeout > MaxQueueTimeout {
			t.Fatalf("%s: proxy_protocol %q queue_timeout %v accepted", what, p.ProxyProtocol, p.QueueTimeout)
		}
		keepalive(what, p.Keepalive, p.KeepaliveInterval, p.KeepaliveCount)
		if p.Protocol == ProtocolUDP && (p.ProxyProtocol == ProxyProtocolV1 || p.QueueTimeout != 0 || p.Keepalive != 0) {
			t.Fatalf("%s: tcp keys accepted in a udp pool: %+v", what, *p)
		}
		for _, b := range p.Backends {
			if b.MaxConnections < 0 || b.MaxConnections > MaxBackendConnections {
				t.Fatalf("%s: backend %s max_connections %d accepted", what, b.Addr, b.MaxConnections)
			}
		}
	}
}
