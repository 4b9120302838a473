package main

import (
	"fmt"
	"path/filepath"
	"slices"
)

// Route names: every proxy has one listener per route, each to its own pool.
const (
	routeBulk     = "bulk"     // -> the sink
	routeEcho     = "echo"     // -> the echo server (conn, ping, idle)
	routeFailover = "failover" // -> this system's 3 tagged echo backends
	routeRedis    = "redis"    // -> the shared redis-server (scenario_redis.go)
	// UDP routes, only when the udp scenario runs (scenario_udp.go).
	routeUDPRR      = "udp_rr"      // -> the UDP echo, a session per request
	routeUDPOneWay  = "udp_oneway"  // -> the UDP sink, one-way
	routeUDPNoReply = "udp_noreply" // -> the UDP sink, one-way, "no reply expected" (nginx only)
)

// udpMode says what a UDP route carries: the proxies are told how many
// replies a session expects.
type udpMode int

const (
	udpNone        udpMode = iota // a TCP route
	udpRRMode                     // one reply per request: the session ends at it
	udpOneWayMode                 // one-way; a session per client until it idles out
	udpNoReplyMode                // one-way, the proxy told no reply is expected (nginx proxy_responses 0)
)

// route is one listener of a system and the backends behind it.
type route struct {
	name     string
	listen   string
	backends []string
	udp      udpMode
	// sni, on the sni listener only: its TLS routes; backends is then the
	// fallback pool's.
	sni []sniPool
}

// systemSpec is a kind of system under test. Adding a variant of l4lb or a
// peer is one line in systemCatalog.
type systemSpec struct {
	name       string
	kind       Kind
	fdsPerConn int    // descriptors held per idle proxied connection
	about      string // one line for the report
	// prepare checks that the system can run (binary installed, builds) and
	// returns the reason to skip it otherwise. Nil: nothing to check.
	prepare func(h *harness, s *system) error
	// start launches the proxy for s.routes. Nil: no proxy (direct).
	start func(h *harness, s *system) (*child, error)
	// noUDP, for a system that cannot proxy UDP, says why; it gets no UDP
	// routes and the udp scenario's report shows it as n/a.
	noUDP string
	// noSNI, for a system that cannot route by TLS server name, says why;
	// it gets no sni listener and the sni scenario shows it as n/a.
	noSNI string
	// udpNoReply: the system has a "no reply expected" UDP session setting
	// (nginx proxy_responses 0), measured one-way beside its default.
	udpNoReply bool
	// optIn: left out of the default run; -systems must name it.
	optIn bool
	// l4lbKeys (l4lb variants) go into the config's [global] and every TCP
	// listener and pool.
	l4lbKeys l4lbKeys
}

// systemCatalog lists every system the harness knows, in run order.
func systemCatalog() []systemSpec {
	return []systemSpec{
		directSystem(),
		l4lbSystem("l4lb", nil),
		l4lbBaselineSystem(),
		l4lbAccessLogSystem(),
		l4lbRedisSystem(),
		l4lbPolicySystem(),
		l4lbBusySystem(),
		l4lbEagerSystem(),
		haproxySystem(),
		nginxSystem(),
		goproxySystem(),
	}
}

// system is a spec placed on its ports, with its running process.
type system struct {
	spec   systemSpec
	index  int
	dir    string
	routes []route
	proc   *child
	// failoverBackends are this system's own 3 tagged echo processes.
	failoverBackends []*child
	// udpDropped says why UDP routes planned for s were taken away (l4lb
	// refused them, or did not relay); empty otherwise.
	udpDropped string
}

func (s *system) file(name string) string { return filepath.Join(s.dir, name) }

func (s *system) route(name string) route {
	for _, r := range s.routes {
		if r.name == name {
			return r
		}
	}
	panic(fmt.Sprintf("system %s has no route %s", s.spec.name, name))
}

// hasRoute reports whether s has a route of that name.
func (s *system) hasRoute(name string) bool {
	return slices.ContainsFunc(s.routes, func(r route) bool { return r.name == name })
}

// hasUDP reports whether s has its UDP routes.
func (s *system) hasUDP() bool {
	return slices.ContainsFunc(s.routes, func(r route) bool { return r.udp != udpNone })
}

// dropUDP takes s's UDP routes away, saying why (for the report).
func (s *system) dropUDP(why string) {
	s.routes = slices.DeleteFunc(s.routes, func(r route) bool { return r.udp != udpNone })
	s.udpDropped = why
}

// noUDPReason says why s has no UDP routes.
func (s *system) noUDPReason() string {
	switch {
	case s.spec.noUDP != "":
		return s.spec.noUDP
	case s.udpDropped != "":
		return s.udpDropped
	}
	return "no UDP routes (the udp scenario was not selected)"
}

// addr is where a client connects for route: the proxy's listener, or the
// first backend itself for direct.
func (s *system) addr(name string) string {
	r := s.route(name)
	if s.spec.start == nil {
		return r.backends[0]
	}
	return r.listen
}

// pids is the proxy's process tree (empty for direct).
func (s *system) pids() []int {
	if s.proc == nil {
		return nil
	}
	return procTree(s.proc.pid)
}

// Port plan, relative to -port-base: the shared sink, echo and redis
// backends on +0, +1 and +2, the UDP echo and sink on +3 and +4, system
// i's failover backends on +100+10i.., its listeners on +500+10i.. (bulk,
// echo, failover, redis, udp_rr, udp_oneway, udp_noreply, sni); the sni
// scenario's TLS echos on +5..+7 (scenario_sni.go).
func sinkPort(base int) int    { return base }
func echoPort(base int) int    { return base + 1 }
func redisPort(base int) int   { return base + 2 }
func udpEchoPort(base int) int { return base + 3 }
func udpSinkPort(base int) int { return base + 4 }
func failoverBackendPort(base, sys, k int) int {
	return base + 100 + 10*sys + k
}
func listenPort(base, sys, k int) int { return base + 500 + 10*sys + k }

// placeSystem assigns ports and routes to system index i; with udp, the
// two UDP routes too, unless the system has no UDP.
func placeSystem(spec systemSpec, i, base int, udp bool) *system {
	s := &system{spec: spec, index: i}
	var fb []string
	for k := range failoverBackendCount {
		fb = append(fb, loopAddr(failoverBackendPort(base, i, k)))
	}
	s.routes = []route{
		{name: routeBulk, listen: loopAddr(listenPort(base, i, 0)), backends: []string{loopAddr(sinkPort(base))}},
		{name: routeEcho, listen: loopAddr(listenPort(base, i, 1)), backends: []string{loopAddr(echoPort(base))}},
		{name: routeFailover, listen: loopAddr(listenPort(base, i, 2)), backends: fb},
		{name: routeRedis, listen: loopAddr(listenPort(base, i, 3)), backends: []string{loopAddr(redisPort(base))}},
	}
	if udp && spec.noUDP == "" {
		s.routes = append(s.routes,
			route{name: routeUDPRR, listen: loopAddr(listenPort(base, i, 4)), backends: []string{loopAddr(udpEchoPort(base))}, udp: udpRRMode},
			route{name: routeUDPOneWay, listen: loopAddr(listenPort(base, i, 5)), backends: []string{loopAddr(udpSinkPort(base))}, udp: udpOneWayMode})
		if spec.udpNoReply {
			s.routes = append(s.routes,
				route{name: routeUDPNoReply, listen: loopAddr(listenPort(base, i, 6)), backends: []string{loopAddr(udpSinkPort(base))}, udp: udpNoReplyMode})
		}
	}
	return s
}

func directSystem() systemSpec {
	return systemSpec{name: "direct", kind: KindDirect, about: "no proxy: the client talks to the backend"}
}
