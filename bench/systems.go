package main

import (
	"fmt"
	"path/filepath"
)

// Route names: every proxy has one listener per route, each to its own pool.
const (
	routeBulk     = "bulk"     // -> the sink
	routeEcho     = "echo"     // -> the echo server (conn, ping, idle)
	routeFailover = "failover" // -> this system's 3 tagged echo backends
	routeRedis    = "redis"    // -> the shared redis-server (scenario_redis.go)
)

// route is one listener of a system and the backends behind it.
type route struct {
	name     string
	listen   string
	backends []string
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
}

// systemCatalog lists every system the harness knows, in run order.
func systemCatalog() []systemSpec {
	return []systemSpec{
		directSystem(),
		l4lbSystem("l4lb", nil),
		// l4lbSystem("l4lb-p1", []string{"GOMAXPROCS=1"}),
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
// backends on +0, +1 and +2, system i's failover backends on +100+10i..,
// its listeners on +500+10i.. (bulk, echo, failover, redis)
func sinkPort(base int) int  { return base }
func echoPort(base int) int  { return base + 1 }
func redisPort(base int) int { return base + 2 }
func failoverBackendPort(base, sys, k int) int {
	return base + 100 + 10*sys + k
}
func listenPort(base, sys, k int) int { return base + 500 + 10*sys + k }

// placeSystem assigns ports and routes to system index i.
func placeSystem(spec systemSpec, i, base int) *system {
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
	return s
}

func directSystem() systemSpec {
	return systemSpec{name: "direct", kind: KindDirect, about: "no proxy: the client talks to the backend"}
}
