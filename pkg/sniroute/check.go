package sniroute

import (
	"fmt"
	"strconv"
)

// Route is what one route matches on.
type Route struct {
	// SNI are its names: exact host names or "*." wildcards, any case, a
	// trailing dot or not. At least one.
	SNI []string
	// ALPN, when not empty, are protocols of which the client must offer
	// one; empty: any, or none offered.
	ALPN []string
}

// Fields of a Route, as Problem names them (and the file's keys are).
const (
	FieldSNI  = "sni"
	FieldALPN = "alpn"
)

// Problem is one reason routes cannot be built.
type Problem struct {
	Route int    // index of the route at fault
	Field string // FieldSNI or FieldALPN
	Index int    // the entry of Field at fault; -1: the field as a whole
	// Other and OtherIndex are the earlier route and entry the one at
	// fault collides with; Other is -1 when the entry is at fault alone.
	Other, OtherIndex int
	// msg says what is wrong; with Other set, the caller's name of the
	// earlier entry goes between msg and rest. (Not a format verb: a
	// protocol name may hold a '%'.)
	msg, rest string
}

// Message says what is wrong, naming the earlier entry it collides with
// by name(route, field, index).
func (p Problem) Message(name func(route int, field string, index int) string) string {
	if p.Other < 0 {
		return p.msg
	}
	return p.msg + name(p.Other, p.Field, p.OtherIndex) + p.rest
}

// Error is "route[R].FIELD[I]: MESSAGE".
func (p Problem) Error() string {
	return entryName(p.Route, p.Field, p.Index) + ": " + p.Message(entryName)
}

func entryName(route int, field string, index int) string {
	s := "route[" + strconv.Itoa(route) + "]." + field
	if index >= 0 {
		s += "[" + strconv.Itoa(index) + "]"
	}
	return s
}

// Check returns every problem of routes, in route order: a route with no
// names, a malformed name or protocol, one listed twice in a route, and
// the overlaps the precedence cannot order (see the package doc).
func Check(routes []Route) []Problem {
	var out []Problem
	add := func(p Problem) { out = append(out, p) }
	// Where each normalized name was first claimed: by a route without
	// alpn (the "" protocol) or by a route for each protocol it lists.
	type claim struct{ route, index int }
	claims := map[string]map[string]claim{}
	for r, rt := range routes {
		if len(rt.SNI) == 0 {
			add(Problem{Route: r, Field: FieldSNI, Index: -1, Other: -1,
				msg: `must not be empty: list the server names the route takes, e.g. ["api.example.com"] or ["*.example.com"]`})
		}
		protocols := checkProtocols(r, rt.ALPN, add)
		if len(rt.ALPN) == 0 {
			protocols = []string{""}
		}
		inRoute := map[string]int{}
		for i, name := range rt.SNI {
			if err := CheckName(name); err != nil {
				add(Problem{Route: r, Field: FieldSNI, Index: i, Other: -1, msg: fmt.Sprintf("%q: %v", name, err)})
				continue
			}
			key := normalize(name)
			if j, dup := inRoute[key]; dup {
				add(Problem{Route: r, Field: FieldSNI, Index: i, Other: r, OtherIndex: j,
					msg: fmt.Sprintf("%q is already listed as ", name), rest: ": keep one"})
				continue
			}
			inRoute[key] = i
			byProto := claims[key]
			if byProto == nil {
				byProto = map[string]claim{}
				claims[key] = byProto
			}
			for _, p := range protocols {
				if c, taken := byProto[p]; taken {
					msg, rest := overlap(name, p)
					add(Problem{Route: r, Field: FieldSNI, Index: i, Other: c.route, OtherIndex: c.index, msg: msg, rest: rest})
					break
				}
			}
			for _, p := range protocols {
				if _, taken := byProto[p]; !taken {
					byProto[p] = claim{r, i}
				}
			}
		}
	}
	return out
}

// overlap says why name, claimed again for protocol p ("": any), cannot
// be ordered against the earlier claim, named between msg and rest.
func overlap(name, p string) (msg, rest string) {
	msg = fmt.Sprintf("%q is also ", name)
	if p == "" {
		return msg, ", and neither route has alpn: nothing orders them; keep the name in one route, or give one of them alpn"
	}
	return msg, fmt.Sprintf(", and both routes list protocol %q in alpn: a client offering it matches both; keep the protocol in one of them", p)
}

// checkProtocols reports the malformed or repeated protocols of route r
// and returns the good ones.
func checkProtocols(r int, alpn []string, add func(Problem)) []string {
	good := make([]string, 0, len(alpn))
	seen := map[string]int{}
	for i, p := range alpn {
		if err := CheckProtocol(p); err != nil {
			add(Problem{Route: r, Field: FieldALPN, Index: i, Other: -1, msg: fmt.Sprintf("%q: %v", p, err)})
			continue
		}
		if j, dup := seen[p]; dup {
			add(Problem{Route: r, Field: FieldALPN, Index: i, Other: r, OtherIndex: j, msg: fmt.Sprintf("%q is already listed as ", p), rest: ": keep one"})
			continue
		}
		seen[p] = i
		good = append(good, p)
	}
	return good
}
