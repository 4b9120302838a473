package sniroute

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustNew(tb testing.TB, routes []Route) *Matcher {
	tb.Helper()
	m, err := New(routes)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestMatchPrecedence is the package doc's rules, one case each.
func TestMatchPrecedence(t *testing.T) {
	routes := []Route{
		0: {SNI: []string{"api.example.com"}},
		1: {SNI: []string{"*.example.com"}, ALPN: []string{"h2"}},
		2: {SNI: []string{"*.example.com"}},
		3: {SNI: []string{"api.example.com"}, ALPN: []string{"h2"}},
		4: {SNI: []string{"api.example.com"}, ALPN: []string{"http/1.1", "acme-tls/1"}},
		5: {SNI: []string{"grpc.example.com"}, ALPN: []string{"h2"}},
		6: {SNI: []string{"Example.COM."}},
	}
	m := mustNew(t, routes)
	tests := []struct {
		name  string
		alpn  []string
		route int // -1: none
	}{
		{"api.example.com", nil, 0},
		{"API.Example.Com.", nil, 0},
		{"api.example.com", []string{"spdy/3"}, 0},                     // a route with alpn not matching falls to the one without
		{"api.example.com", []string{"h2"}, 3},                         // with alpn beats without
		{"api.example.com", []string{"http/1.1", "h2"}, 4},             // the client's first preference
		{"api.example.com", []string{"h2", "http/1.1"}, 3},             // ...either way
		{"api.example.com", []string{"spdy/3", "acme-tls/1", "h2"}, 4}, // the first offered that a route names
		{"web.example.com", nil, 2},                                    // wildcard
		{"web.example.com", []string{"h2"}, 1},                         // wildcard with alpn
		{"web.example.com", []string{"H2"}, 2},                         // alpn is exact bytes
		{"grpc.example.com", []string{"h2"}, 5},                        // exact with alpn
		{"grpc.example.com", []string{"http/1.1"}, 2},                  // exact not matching falls to the wildcard
		{"grpc.example.com", nil, 2},                                   // ...with no alpn offered too
		{"example.com", nil, 6},                                        // the wildcard's own suffix is not under it
		{"example.com", []string{"h2"}, 6},                             // exact, without alpn
		{"a.b.example.com", nil, -1},                                   // one label only
		{"other.test", nil, -1},                                        // no route
		{"", nil, -1},                                                  // no SNI
		{".", nil, -1},                                                 // nothing but the dot
		{".example.com", nil, -1},                                      // an empty first label is no label
		{"api.example.com..", nil, -1},                                 // one trailing dot only
		{strings.Repeat("a", 250) + ".example.com", nil, -1},           // longer than any name
		{"api.example.com\x00", nil, -1},                               // bytes off the wire compare as they are
		{"*.example.com", nil, 2},                                      // a literal "*" label is a label
	}
	for _, tt := range tests {
		r, ok := m.Match(tt.name, tt.alpn)
		if ok != (tt.route >= 0) || ok && r != tt.route {
			t.Errorf("Match(%q, %q) = %d, %v; want %d", tt.name, tt.alpn, r, ok, tt.route)
		}
	}
}

func TestMatchEmpty(t *testing.T) {
	var none *Matcher
	for _, m := range []*Matcher{none, mustNew(t, nil)} {
		if r, ok := m.Match("a.example.com", []string{"h2"}); ok {
			t.Errorf("Match on no routes = %d, true", r)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	m := mustNew(t, benchRoutes(1000))
	queries := benchQueries(64)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		q := queries[i%len(queries)]
		m.Match(q.name, q.alpn)
		i++
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times a call", allocs)
	}
}

// referenceMatch is the package doc's rule written as plainly as it can
// be: every route that matches gets a rank (exact before wildcard, then
// the offered protocol's position, no alpn after any), and the least rank
// wins. tie is true when two routes share the least rank: what Check must
// have refused.
func referenceMatch(routes []Route, name string, alpn []string) (route int, ok, tie bool) {
	type rank struct{ wildcard, proto int }
	less := func(a, b rank) bool { return a.wildcard < b.wildcard || a.wildcard == b.wildcard && a.proto < b.proto }
	name = asciiLower(strings.TrimSuffix(name, "."))
	if len(name) > MaxNameLen {
		return -1, false, false // no DNS name: nothing matches it
	}
	best, route := rank{}, -1
	for r, rt := range routes {
		for _, pattern := range rt.SNI {
			pattern = asciiLower(strings.TrimSuffix(pattern, "."))
			wildcard := 0
			if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
				first, rest, dotted := strings.Cut(name, ".")
				if !dotted || first == "" || rest != suffix {
					continue
				}
				wildcard = 1
			} else if pattern != name || name == "" {
				continue
			}
			proto := len(alpn) // no alpn: after every offered protocol
			if len(rt.ALPN) > 0 {
				proto = slices.IndexFunc(alpn, func(p string) bool { return slices.Contains(rt.ALPN, p) })
				if proto < 0 {
					continue
				}
			}
			rk := rank{wildcard, proto}
			switch {
			case route < 0 || less(rk, best):
				best, route, tie = rk, r, false
			case rk == best && r != route:
				tie = true
			}
		}
	}
	return route, route >= 0, tie
}

// asciiLower folds A-Z only: a server name is ASCII (RFC 6066), and
// Unicode folding would make "\u212a" (the Kelvin sign) a "k".
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// FuzzMatch checks Match against referenceMatch for any name and any
// route names Check accepts: an exact or wildcard route, one with alpn
// beside one without.
func FuzzMatch(f *testing.F) {
	f.Add("*.example.com", "a.example.com", "b.example.com", "h2", "h2")
	f.Add("API.example.com.", "api.EXAMPLE.com", "\u212a.example.com", "h2", "http/1.1")
	f.Add("k.example.com", "\u212a.example.com", "K.example.com.", "x", "")
	f.Add("*.example.com", "x.example.com", strings.Repeat("a", 250)+".example.com", "h2", "h2")
	f.Fuzz(func(t *testing.T, first, second, name, protocol, offered string) {
		routes := []Route{{SNI: []string{first}}, {SNI: []string{second}, ALPN: []string{protocol}}, {SNI: []string{first, second}, ALPN: []string{"other"}}}
		for len(routes) > 0 && len(Check(routes)) > 0 {
			routes = routes[:len(routes)-1]
		}
		m := mustNew(t, routes)
		alpn := []string{offered}
		want, wantOK, tie := referenceMatch(routes, name, alpn)
		if tie {
			t.Fatalf("Check accepted %+v, yet %q %q ties", routes, name, alpn)
		}
		if got, ok := m.Match(name, alpn); ok != wantOK || ok && got != want {
			t.Fatalf("routes %+v: Match(%q, %q) = %d, %v; the reference says %d, %v", routes, name, alpn, got, ok, want, wantOK)
		}
	})
}

var (
	propLabels = []string{"a", "b", "c", "A"}
	propProtos = []string{"h2", "http/1.1", "x"}
)

func randomName(rng *rand.Rand) string {
	n := 1 + rng.IntN(3)
	labels := make([]string, n)
	for i := range labels {
		labels[i] = propLabels[rng.IntN(len(propLabels))]
	}
	name := strings.Join(labels, ".")
	if rng.IntN(5) == 0 {
		name += "."
	}
	return name
}

func randomProtos(rng *rand.Rand, most int) []string {
	var out []string
	for _, i := range rng.Perm(len(propProtos))[:rng.IntN(most+1)] {
		out = append(out, propProtos[i])
	}
	return out
}

// TestMatchAgreesWithReference builds random route sets (a route is kept
// when Check still accepts the set with it) and compares Match with
// referenceMatch on random names and offers; on the refused routes it
// checks the reference sees the tie Check claimed.
func TestMatchAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	for set := range 300 {
		var routes []Route
		for range 1 + rng.IntN(12) {
			rt := Route{ALPN: randomProtos(rng, 2)}
			for range 1 + rng.IntN(2) {
				name := randomName(rng)
				if rng.IntN(3) == 0 {
					name = "*." + name
				}
				rt.SNI = append(rt.SNI, name)
			}
			candidate := append(slices.Clone(routes), rt)
			if problems := Check(candidate); len(problems) > 0 {
				checkRefusalIsATie(t, candidate, problems)
				continue
			}
			routes = candidate
		}
		m := mustNew(t, routes)
		for range 200 {
			name := randomName(rng)
			if rng.IntN(2) == 0 {
				name = strings.ToUpper(name)
			}
			alpn := randomProtos(rng, 3)
			want, wantOK, tie := referenceMatch(routes, name, alpn)
			if tie {
				t.Fatalf("set %d: Check accepted %+v, yet %q %q ties", set, routes, name, alpn)
			}
			got, gotOK := m.Match(name, alpn)
			if gotOK != wantOK || gotOK && got != want {
				t.Fatalf("set %d: routes %+v: Match(%q, %q) = %d, %v; the reference says %d, %v", set, routes, name, alpn, got, gotOK, want, wantOK)
			}
		}
	}
}

// checkRefusalIsATie checks that each overlap Check refuses is one the
// precedence cannot order: a client naming the name (the wildcard's with
// a label of its own) and offering the shared protocol ties.
func checkRefusalIsATie(t *testing.T, routes []Route, problems []Problem) {
	t.Helper()
	for _, p := range problems {
		if p.Other < 0 || p.Other == p.Route {
			continue // the entry alone, or a repeat within one route
		}
		name := strings.Replace(routes[p.Route].SNI[p.Index], "*", "z", 1)
		var alpn []string
		for _, proto := range routes[p.Route].ALPN {
			if slices.Contains(routes[p.Other].ALPN, proto) {
				alpn = []string{proto}
			}
		}
		if _, _, tie := referenceMatch(routes[:p.Route+1], name, alpn); !tie {
			t.Fatalf("Check refused %+v (%v), yet %q %q does not tie", routes, p, name, alpn)
		}
	}
}

// benchRoutes is n routes as a large edge might have them: mostly exact
// names, every tenth a wildcard, every fourth with alpn.
func benchRoutes(n int) []Route {
	routes := make([]Route, n)
	for i := range routes {
		name := fmt.Sprintf("svc%d.example.com", i)
		if i%10 == 0 {
			name = fmt.Sprintf("*.tenant%d.example.com", i)
		}
		routes[i].SNI = []string{name}
		if i%4 == 0 {
			routes[i].ALPN = []string{"h2"}
		}
	}
	return routes
}

type query struct {
	name string
	alpn []string
}

// benchQueries are hits on exact names and wildcards, mixed case, and
// misses, with a browser's offer.
func benchQueries(n int) []query {
	offer := []string{"h2", "http/1.1"}
	q := make([]query, n)
	for i := range q {
		switch i % 4 {
		case 0:
			q[i] = query{fmt.Sprintf("svc%d.example.com", i*7+1), offer}
		case 1:
			q[i] = query{fmt.Sprintf("www.tenant%d.example.com", i*10), offer}
		case 2:
			q[i] = query{fmt.Sprintf("SVC%d.Example.COM.", i*7+3), nil}
		default:
			q[i] = query{fmt.Sprintf("missing%d.example.org", i), offer}
		}
	}
	return q
}

// BenchmarkMatch matches against 1,000 routes, and against 10 and 10,000
// to show the cost does not grow with them.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{1000, 10, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			m := mustNew(b, benchRoutes(n))
			queries := benchQueries(64)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := queries[i%len(queries)]
				m.Match(q.name, q.alpn)
				i++
			}
		})
	}
}
