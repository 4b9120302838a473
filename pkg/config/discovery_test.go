package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const discoveryBase = "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n[pool.web]\n"

func TestDiscoveryDecodes(t *testing.T) {
	cfg := mustParse(t, discoveryBase+`[pool.web.discovery]
srv = "_web._tcp.svc.example.test"
resolvers = ["127.0.0.1", "[::1]:5353"]
min_refresh = "2s"
max_refresh = "1m"
empty_grace = "0s"
family = "ipv6"
max_connections = 10
`)
	p := cfg.Pools["web"]
	if len(p.Backends) != 0 || p.Discovery == nil {
		t.Fatalf("backends %v, discovery %v: want a pool found in DNS only", p.Backends, p.Discovery)
	}
	want := Discovery{SRV: "_web._tcp.svc.example.test", Resolvers: []string{"127.0.0.1:53", "[::1]:5353"},
		Timeout: 2 * time.Second, MinRefresh: 2 * time.Second, MaxRefresh: time.Minute, EmptyGrace: 0,
		Family: FamilyIPv6, Weight: 1, MaxConnections: 10, Line: p.Discovery.Line}
	if !reflect.DeepEqual(*p.Discovery, want) {
		t.Fatalf("decoded %+v\nwant    %+v", *p.Discovery, want)
	}
	if p.Discovery.Line != 6 {
		t.Errorf("line %d, want 6 (the table's header)", p.Discovery.Line)
	}
}

func TestDiscoveryBesideStaticBackends(t *testing.T) {
	cfg := mustParse(t, discoveryBase+"[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n[pool.web.discovery]\ndns = \"web.svc.example.test:9001\"\nweight = 5\n")
	p := cfg.Pools["web"]
	if len(p.Backends) != 1 || p.Discovery == nil || p.Discovery.DNS != "web.svc.example.test:9001" || p.Discovery.Weight != 5 {
		t.Fatalf("backends %v, discovery %+v", p.Backends, p.Discovery)
	}
}

func TestDiscoveryErrors(t *testing.T) {
	tests := []struct{ name, body, key, msg string }{
		{"nothing to look up", "[pool.web.discovery]\nfamily = \"any\"\n", "pool.web.discovery", "names nothing to look up"},
		{"both names", "[pool.web.discovery]\ndns = \"a.test:1\"\nsrv = \"_a._tcp.test\"\n", "pool.web.discovery.srv", "dns and srv are both set"},
		{"no port", "[pool.web.discovery]\ndns = \"web.test\"\n", "pool.web.discovery.dns", "is not NAME:PORT"},
		{"an address", "[pool.web.discovery]\ndns = \"10.0.0.1:80\"\n", "pool.web.discovery.dns", "is an address, not a name"},
		{"bad label", "[pool.web.discovery]\ndns = \"we b.test:80\"\n", "pool.web.discovery.dns", "is not a DNS name"},
		{"not an SRV name", "[pool.web.discovery]\nsrv = \"web.test\"\n", "pool.web.discovery.srv", "is not an SRV name"},
		{"bad resolver", "[pool.web.discovery]\ndns = \"web.test:80\"\nresolvers = [\"ns1.test\"]\n", "pool.web.discovery.resolvers", "is not IP or IP:PORT"},
		{"refresh order", "[pool.web.discovery]\ndns = \"web.test:80\"\nmin_refresh = \"10s\"\nmax_refresh = \"5s\"\n", "pool.web.discovery.max_refresh", "shorter than min_refresh"},
		{"refresh too short", "[pool.web.discovery]\ndns = \"web.test:80\"\nmin_refresh = \"1ms\"\n", "pool.web.discovery.min_refresh", "out of range"},
		{"weight with srv", "[pool.web.discovery]\nsrv = \"_a._tcp.test\"\nweight = 2\n", "pool.web.discovery.weight", "SRV records carry"},
		{"family", "[pool.web.discovery]\ndns = \"web.test:80\"\nfamily = \"ipx\"\n", "pool.web.discovery.family", "is not a family (of addresses); use one of: any, ipv4, ipv6"},
		{"no backends at all", "", "pool.web.backend", "or find them in DNS with [pool.web.discovery]"},
		{"backups of nothing", "[pool.web.discovery]\ndns = \"web.test:80\"\nbackup = true\n", "pool.web.discovery.backup", "no primary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, discoveryBase+tt.body)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			if errs[0].Key != tt.key || !strings.Contains(errs[0].Msg, tt.msg) {
				t.Fatalf("got %s: %s; want %s: …%s…", errs[0].Key, errs[0].Msg, tt.key, tt.msg)
			}
		})
	}
}
