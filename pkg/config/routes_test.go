package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Test sources for TLS routes: listener web (lines 1-4), the given keys
// and [[listener.route]] tables, then pools web and api.
func withRoutes(keys string) string {
	return listenerWeb + keys + poolWeb + poolOf("api", `"127.0.0.1:9002"`)
}

// route is one [[listener.route]] table; sni is written as TOML.
func route(sni, pool string) string {
	return "[[listener.route]]\nsni = " + sni + "\npool = " + pool + "\n"
}

func TestRoutesAreRead(t *testing.T) {
	cfg := mustParse(t, withRoutes("inspect_timeout = \"2s\"\non_unrecognized = \"reset\"\non_too_large = \"reset\"\n"+
		route(`["API.example.com."]`, `"api"`)+
		route(`["*.example.com"]`, `"web"`)+"alpn = [\"h2\", \"http/1.1\"]\n"+
		route(`["b.example.com"]`, `"api"`)+"alpn = []\nname = \"b-api\"\n"))
	l := cfg.Listeners[0]
	want := []Route{
		{SNI: []string{"API.example.com."}, Pool: "api", Name: "api", Line: 8},
		{SNI: []string{"*.example.com"}, ALPN: []string{"h2", "http/1.1"}, Pool: "web", Name: "web", Line: 11},
		{SNI: []string{"b.example.com"}, Pool: "api", Name: "b-api", Line: 15},
	}
	if !reflect.DeepEqual(l.Routes, want) {
		t.Errorf("routes = %+v\nwant     %+v", l.Routes, want)
	}
	if l.InspectTimeout != 2*time.Second || l.OnUnrecognized != OnReset || l.OnTooLarge != OnReset {
		t.Errorf("inspection = %v %q %q, want 2s reset reset", l.InspectTimeout, l.OnUnrecognized, l.OnTooLarge)
	}
	m, err := l.RouteMatcher()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		alpn  []string
		route int
	}{{"api.example.com", nil, 0}, {"x.example.com", []string{"h2"}, 1}, {"b.example.com", []string{"h2"}, 2}, {"x.example.com", nil, -1}} {
		if r, ok := m.Match(tt.name, tt.alpn); ok != (tt.route >= 0) || ok && r != tt.route {
			t.Errorf("Match(%q, %q) = %d, %v; want %d", tt.name, tt.alpn, r, ok, tt.route)
		}
	}
	if p := cfg.Pools["api"]; p.Protocol != ProtocolTCP {
		t.Errorf("pool api, reached only by routes, is %q", p.Protocol)
	}
	if m, err := cfg.Listeners[0].RouteMatcher(); m == nil || err != nil {
		t.Errorf("RouteMatcher = %v, %v", m, err)
	}
	if m, err := mustParse(t, validBase).Listeners[0].RouteMatcher(); m != nil || err != nil {
		t.Errorf("RouteMatcher without routes = %v, %v; want nil, nil", m, err)
	}
}

func TestRoutesValid(t *testing.T) {
	for _, tt := range []struct{ name, src string }{
		{"one name with and without alpn", withRoutes(route(`["a.example.com"]`, `"web"`) + route(`["a.example.com"]`, `"api"`) + "alpn = [\"h2\"]\n")},
		{"one name with disjoint alpn", withRoutes(route(`["a.example.com"]`, `"web"`) + "alpn = [\"http/1.1\"]\n" + route(`["a.example.com"]`, `"api"`) + "alpn = [\"h2\"]\n")},
		{"a name and its wildcard", withRoutes(route(`["a.example.com"]`, `"web"`) + route(`["*.example.com"]`, `"api"`))},
		{"routes beside the PROXY protocol", withRoutes("accept_proxy = true\ntrusted_proxies = [\"10.0.0.0/8\"]\n" + route(`["a.example.com"]`, `"api"`))},
		{"routes as an inline array", withRoutes(`route = [{sni = ["a.example.com"], pool = "api"}]` + "\n")},
		{"sni hashing through routes", listenerWeb + route(`["a.example.com"]`, `"api"`) + poolWeb + "[pool.api]\nhash_key = \"sni\"\nalgorithm = \"maglev\"\n[[pool.api.backend]]\naddr = \"127.0.0.1:9002\"\n"},
		{"sni hashing on a routing listener's own pool", listenerWeb + route(`["a.example.com"]`, `"api"`) + "[pool.web]\nhash_key = \"sni\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n" + poolOf("api", `"127.0.0.1:9002"`)},
	} {
		t.Run(tt.name, func(t *testing.T) { mustParse(t, tt.src) })
	}
}

func TestRoutesReportEachProblem(t *testing.T) {
	udpRoute := listenerOn("dns", `"127.0.0.1:5353"`, "udp", "dns") + "[[listener.route]] #!\nsni = [\"a.example.com\"]\npool = \"dns\"\n" + poolDNS
	tests := []problem{
		{"route on a udp listener", udpRoute, "listener[0].route", `only for protocol = "tcp" listeners: a route reads the TLS ClientHello`},
		{"inspect_timeout on a udp listener", withUDPListener("inspect_timeout = \"1s\" #!\n"), "listener[0].inspect_timeout", `only for protocol = "tcp" listeners`},
		{"inspect_timeout without routes", withRoutes("inspect_timeout = \"1s\" #!\n"), "listener[0].inspect_timeout", "only with [[listener.route]]: a listener without routes sends every client to its pool"},
		{"on_unrecognized without routes", withRoutes("on_unrecognized = \"reset\" #!\n"), "listener[0].on_unrecognized", "only with [[listener.route]]"},
		{"on_too_large without routes", withRoutes("on_too_large = \"reset\" #!\n"), "listener[0].on_too_large", "only with [[listener.route]]"},
		{"inspect_timeout too short", withRoutes("inspect_timeout = \"10ms\" #!\n" + route(`["a.example.com"]`, `"api"`)), "listener[0].inspect_timeout", "out of range"},
		{"on_unrecognized unknown", withRoutes("on_unrecognized = \"drop\" #!\n" + route(`["a.example.com"]`, `"api"`)), "listener[0].on_unrecognized", `"drop" is not a way to treat a client that is not TLS; use one of: fallback, reset`},
		{"on_too_large unknown", withRoutes("on_too_large = \"truncate\" #!\n" + route(`["a.example.com"]`, `"api"`)), "listener[0].on_too_large", "use one of: fallback, reset"},
		{"empty route list", withRoutes("route = [] #!\n"), "listener[0].route", "an empty list of routes"},
		{"route without sni", withRoutes("[[listener.route]] #!\npool = \"api\"\n"), "listener[0].route[0].sni", "required key is missing: the server names"},
		{"route without pool", withRoutes("[[listener.route]] #!\nsni = [\"a.example.com\"]\n"), "listener[0].route[0].pool", "required key is missing: the name of the [pool.NAME] the route"},
		{"route with an empty pool", withRoutes("[[listener.route]]\nsni = [\"a.example.com\"]\npool = \"\" #!\n"), "listener[0].route[0].pool", "must not be empty"},
		{"route to an unknown pool", withRoutes("[[listener.route]]\nsni = [\"a.example.com\"]\npool = \"nope\" #!\n"), "listener[0].route[0].pool", `pool "nope" is not defined; defined pools: api, web`},
		{"tcp route to a pool a udp listener serves", "[[listener]]\nname = \"edge\"\nbind = \"127.0.0.1:8443\"\npool = \"web\"\n" + route(`["a.example.com"]`, `"dns"`+" #!") + poolWeb + validUDP,
			"listener[0].route[0].pool", `pool "dns" is served by udp listener[1] "dns" (line 11), and a route's clients are TCP connections`},
		{"empty sni", withRoutes("[[listener.route]]\nsni = [] #!\npool = \"api\"\n"), "listener[0].route[0].sni", `must not be empty: list the server names`},
		{"sni not a list", withRoutes("[[listener.route]]\nsni = \"a.example.com\" #!\npool = \"api\"\n"), "listener[0].route[0].sni", "must be an array of strings"},
		{"malformed name, its own line", withRoutes("[[listener.route]]\nsni = [\n  \"ok.example.com\",\n  \"a.*.example.com\", #!\n]\npool = \"api\"\n"), "listener[0].route[0].sni[1]", `"a.*.example.com": "*" may only be the whole leftmost label`},
		{"bare wildcard", withRoutes(route(`["*"] #!`, `"api"`)), "listener[0].route[0].sni[0]", `"*" alone would match every name`},
		{"IP literal", withRoutes(route(`["192.0.2.1"] #!`, `"api"`)), "listener[0].route[0].sni[0]", "an IP address: TLS clients send no server name"},
		{"label too long", withRoutes(route(`["`+strings.Repeat("a", 64)+`.example.com"] #!`, `"api"`)), "listener[0].route[0].sni[0]", "more than the 63 of a DNS label"},
		{"name twice in a route", withRoutes(route(`["a.example.com", "A.example.com."] #!`, `"api"`)), "listener[0].route[0].sni[1]", `"A.example.com." is already listed as listener[0].route[0].sni[0] (line 6): keep one`},
		{"same name in two routes", withRoutes(route(`["a.example.com"]`, `"web"`) + route(`["b.example.com", "A.EXAMPLE.COM"] #!`, `"api"`)),
			"listener[0].route[1].sni[1]", `"A.EXAMPLE.COM" is also listener[0].route[0].sni[0] (line 6), and neither route has alpn: nothing orders them`},
		{"same wildcard in two routes", withRoutes(route(`["*.example.com"]`, `"web"`) + route(`["*.example.com"] #!`, `"api"`)),
			"listener[0].route[1].sni[0]", `is also listener[0].route[0].sni[0] (line 6), and neither route has alpn`},
		{"same name, a shared protocol", withRoutes(route(`["a.example.com"]`, `"web"`) + "alpn = [\"h2\", \"http/1.1\"]\n" + route(`["a.example.com"] #!`, `"api"`) + "alpn = [\"http/1.1\"]\n"),
			"listener[0].route[1].sni[0]", `and both routes list protocol "http/1.1" in alpn: a client offering it matches both`},
		{"empty protocol", withRoutes(route(`["a.example.com"]`, `"api"`) + "alpn = [\"h2\", \"\"] #!\n"), "listener[0].route[0].alpn[1]", `"": an empty protocol name`},
		{"protocol twice", withRoutes(route(`["a.example.com"]`, `"api"`) + "alpn = [\"h2\", \"h2\"] #!\n"), "listener[0].route[0].alpn[1]", `"h2" is already listed as listener[0].route[0].alpn[0] (line 8)`},
		{"route name with a space", withRoutes(route(`["a.example.com"]`, `"api"`) + "name = \"my api\" #!\n"), "listener[0].route[0].name", `name "my api" may contain only letters, digits`},
		{"unknown key in a route", withRoutes(route(`["a.example.com"]`, `"api"`) + "snis = [] #!\n"), "listener[0].route[0].snis", `did you mean "sni"?`},
		{"sni hashing on a udp pool", withUDPPool("hash_key = \"sni\" #!\n"), "pool.dns.hash_key", `"sni" hashes the TLS server name of a TCP connection, and this pool is UDP`},
		{"sni hashing behind a listener without routes", withPool("hash_key = \"sni\" #!\n"), "pool.web.hash_key", `only a listener with [[listener.route]] reads, and listener[0] "web" (line 1) sends its clients here without routes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, parseErrors(t, tt.src)) })
	}
}
