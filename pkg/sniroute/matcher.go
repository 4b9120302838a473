package sniroute

import (
	"bytes"
	"strings"
)

// Matcher picks a route for a server name and the offered protocols. It
// is not changed after New, so any number of event loops may share it.
type Matcher struct {
	exact map[string]choice // by the name
	wild  map[string]choice // by the suffix after "*."
}

// choice is the routes of one name: the one without alpn, and those with,
// by protocol.
type choice struct {
	any     int // the route without alpn; -1: none
	byProto []protoRoute
}

type protoRoute struct {
	protocol string
	route    int
}

// New builds the Matcher of routes, indexed as given; it fails when Check
// finds a problem, with the first.
func New(routes []Route) (*Matcher, error) {
	if problems := Check(routes); len(problems) > 0 {
		return nil, problems[0]
	}
	m := &Matcher{exact: map[string]choice{}, wild: map[string]choice{}}
	for r, rt := range routes {
		for _, name := range rt.SNI {
			key := normalize(name)
			index := m.exact
			if suffix, ok := strings.CutPrefix(key, wildcardPrefix); ok {
				key, index = suffix, m.wild
			}
			c, ok := index[key]
			if !ok {
				c.any = -1
			}
			if len(rt.ALPN) == 0 {
				c.any = r
			}
			for _, p := range rt.ALPN {
				c.byProto = append(c.byProto, protoRoute{p, r})
			}
			index[key] = c
		}
	}
	return m, nil
}

// Match returns the index of the route for a connection that names
// serverName and offers alpn (most preferred first), or ok false when no
// route matches: the listener's own pool serves it. It does not allocate.
func (m *Matcher) Match(serverName string, alpn []string) (route int, ok bool) {
	if m == nil {
		return -1, false
	}
	n := len(serverName)
	if n > 0 && serverName[n-1] == '.' {
		n--
	}
	if n == 0 || n > MaxNameLen {
		return -1, false
	}
	// Lowered into a buffer on the stack: a map index by string(bytes)
	// does not copy them.
	var buf [MaxNameLen]byte
	for i := range n {
		c := serverName[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	name := buf[:n]
	if c, found := m.exact[string(name)]; found {
		if r, ok := c.pick(alpn); ok {
			return r, true
		}
	}
	if len(m.wild) == 0 {
		return -1, false
	}
	if dot := bytes.IndexByte(name, '.'); dot > 0 {
		if c, found := m.wild[string(name[dot+1:])]; found {
			return c.pick(alpn)
		}
	}
	return -1, false
}

// pick is the route of this name for a client offering alpn: the one
// listing its most preferred protocol, else the one without alpn.
func (c choice) pick(alpn []string) (int, bool) {
	for _, offered := range alpn {
		for _, pr := range c.byProto {
			if pr.protocol == offered {
				return pr.route, true
			}
		}
	}
	return c.any, c.any >= 0
}
