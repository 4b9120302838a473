package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/l4lb/l4lb/pkg/sniroute"
)

// TLS routing (issue 29): a TCP listener with [[listener.route]] tables
// reads each client's ClientHello, without consuming it, and sends the
// client to the pool of the route its server name (and offered ALPN
// protocols) match, or to the listener's own pool. The names, the
// precedence among routes and the overlaps refused are pkg/sniroute's;
// this file reads the keys and says where a problem is.

// What a listener with routes does with a client whose first bytes are
// not a ClientHello it can read ([[listener]] on_unrecognized and
// on_too_large).
const (
	// OnFallback: the listener's own pool, the bytes read passed on first.
	OnFallback = "fallback"
	// OnReset: the connection is reset, no backend dialed.
	OnReset = "reset"
)

// Inspections lists the accepted on_unrecognized and on_too_large values.
func Inspections() []string { return []string{OnFallback, OnReset} }

// Bounds of inspect_timeout. How much of a ClientHello is read before
// on_too_large applies is pkg/clienthello's (MaxHelloLen, 16 KiB).
const (
	DefaultInspectTimeout = 5 * time.Second
	MinInspectTimeout     = 100 * time.Millisecond
	MaxInspectTimeout     = 60 * time.Second
)

// Route is one [[listener.route]] table.
type Route struct {
	// SNI are the server names the route takes, as written: exact host
	// names or "*." and one (one whole leftmost label), any case, a
	// trailing dot or not.
	SNI []string
	// ALPN, when not nil, are protocols of which the client must offer
	// one for the route to match; nil: any, or none.
	ALPN []string
	Pool string // name of a TCP pool in Config.Pools
	// Name is the route's name in metrics and the access log: as written,
	// or Pool when the file leaves it out (or writes "").
	Name string
	Line int // line of the [[listener.route]] header
}

// RouteMatcher builds the matcher of the listener's routes, whose Match
// returns an index into Routes; nil when it has none. It fails only for a
// Listener that Parse did not check.
func (l *Listener) RouteMatcher() (*sniroute.Matcher, error) {
	if len(l.Routes) == 0 {
		return nil, nil
	}
	return sniroute.New(matcherRoutes(l.Routes))
}

func matcherRoutes(routes []Route) []sniroute.Route {
	out := make([]sniroute.Route, len(routes))
	for i, r := range routes {
		out[i] = sniroute.Route{SNI: r.SNI, ALPN: r.ALPN}
	}
	return out
}

// decodeRoutes reads a listener's [[listener.route]] tables and the keys
// that tune their inspection. tcp is false when the listener is known to
// be UDP: all of them are then refused.
func decodeRoutes(t *table, l *Listener, tcp bool) {
	notTCP := `only for protocol = "tcp" listeners: a route reads the TLS ClientHello at the start of a TCP stream`
	misplaced := t.misplaced("route", tcp, "%s", notTCP)
	var keys []string    // the canonical key of each route, for messages
	var namesRead []bool // each route's sni is a list of strings
	if !misplaced {
		for _, rt := range t.tables("route") {
			r, ok := decodeRoute(rt)
			l.Routes = append(l.Routes, r)
			keys = append(keys, rt.key)
			namesRead = append(namesRead, ok)
		}
		if v, ok := t.m["route"]; ok && isEmptyArray(v) {
			t.c.add(t.keyOf("route"), "an empty list of routes: leave route out, and every client goes to the listener's pool")
		}
	}
	noRoutes := "only with [[listener.route]]: a listener without routes sends every client to its pool and inspects nothing"
	for _, k := range []string{"inspect_timeout", "on_unrecognized", "on_too_large"} {
		if t.misplaced(k, tcp, "%s", notTCP) || t.misplaced(k, t.written("route"), "%s", noRoutes) {
			continue
		}
		switch k {
		case "inspect_timeout":
			t.durationIn(k, &l.InspectTimeout)
		case "on_unrecognized":
			t.oneOf(k, &l.OnUnrecognized, "way to treat a client that is not TLS")
		case "on_too_large":
			t.oneOf(k, &l.OnTooLarge, "way to treat a ClientHello too large to read")
		}
	}
	checkRoutes(t.c, l.Routes, keys, namesRead)
}

// decodeRoute reads one [[listener.route]]; namesRead is false when its
// sni is missing or not a list of strings (and reported).
func decodeRoute(t *table) (r Route, namesRead bool) {
	r.Line = t.c.pos.line(t.key)
	t.require("sni", `the server names the route takes, e.g. ["api.example.com"] or ["*.example.com"]`)
	t.require("pool", "the name of the [pool.NAME] the route sends its clients to")
	namesRead = t.strs("sni", &r.SNI)
	if t.strs("alpn", &r.ALPN) && len(r.ALPN) == 0 {
		r.ALPN = nil // [] is what leaving alpn out says
	}
	if t.str("pool", &r.Pool) && r.Pool == "" {
		t.c.add(t.keyOf("pool"), "must not be empty: name the [pool.NAME] the route sends its clients to")
	}
	if t.str("name", &r.Name) && r.Name != "" {
		checkName(t.c, t.keyOf("name"), r.Name)
	}
	if r.Name == "" {
		r.Name = r.Pool
	}
	t.done()
	return r, namesRead
}

// checkRoutes reports what pkg/sniroute finds wrong with the routes,
// each at its key and line. A route whose sni was not read (namesRead
// false) is already reported: its empty list is not reported again.
func checkRoutes(c *collector, routes []Route, keys []string, namesRead []bool) {
	conds := matcherRoutes(routes)
	name := func(route int, field string, index int) string {
		k := joinKey(keys[route], field)
		if index >= 0 {
			k = indexKey(k, index)
		}
		return k
	}
	for _, p := range sniroute.Check(conds) {
		key := name(p.Route, p.Field, p.Index)
		if p.Field == sniroute.FieldSNI && p.Index < 0 && !namesRead[p.Route] {
			continue
		}
		located := func(route int, field string, index int) string {
			k := name(route, field, index)
			return fmt.Sprintf("%s (line %d)", k, c.pos.line(k))
		}
		c.add(key, "%s", p.Message(located))
	}
}

// checkSNIHashing reports a pool hashing by server name (hash_key = "sni")
// that a client can reach without its name having been read: through a
// listener without routes, or over UDP.
func checkSNIHashing(c *collector, cfg *Config) {
	for _, name := range cfg.PoolNames {
		p := cfg.Pools[name]
		if p.HashKey != HashKeySNI {
			continue
		}
		key := joinKey(joinKey("pool", name), "hash_key")
		if p.Protocol == ProtocolUDP {
			c.add(key, `"sni" hashes the TLS server name of a TCP connection, and this pool is UDP: use "source-ip" or "source-ip-port"`)
			continue
		}
		for i, l := range cfg.Listeners {
			if l.Pool == name && len(l.Routes) == 0 && l.Protocol == ProtocolTCP {
				c.add(key, `"sni" hashes the TLS server name, which only a listener with [[listener.route]] reads, and listener[%d] %q (line %d) sends its clients here without routes: every one would hash by its source IP; give that listener routes, or use "source-ip"`, i, l.Name, l.Line)
				break
			}
		}
	}
}

// checkRoutePools reports a route naming a pool that is not defined, or
// one a UDP listener serves: a route's clients are TCP connections.
func checkRoutePools(c *collector, cfg *Config) {
	for i, l := range cfg.Listeners {
		for r, rt := range l.Routes {
			if rt.Pool == "" {
				continue
			}
			key := joinKey(indexKey(joinKey(indexKey("listener", i), "route"), r), "pool")
			if _, ok := cfg.Pools[rt.Pool]; !ok {
				c.add(key, "pool %q is not defined; %s", rt.Pool, definedPools(cfg))
				continue
			}
			if j := slices.IndexFunc(cfg.Listeners, func(o Listener) bool { return o.Pool == rt.Pool && o.Protocol == ProtocolUDP }); j >= 0 {
				o := cfg.Listeners[j]
				c.add(key, "pool %q is served by udp listener[%d] %q (line %d), and a route's clients are TCP connections: a pool serves one protocol; define a second pool with the same backends", rt.Pool, j, o.Name, o.Line)
			}
		}
	}
}
