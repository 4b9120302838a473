// Package admin serves l4lb's operator endpoint: Prometheus metrics on
// /metrics and the JSON admin API on /api/v1, with Go profiles on
// /debug/pprof/ and a read-only status page on / (status.go) that
// renders GET /api/v1/pools in a browser.
//
// Routes of the API:
//
//	GET  /                                              the status page (HTML; exactly "/")
//	GET  /api/v1/pools                                  every pool and its backends
//	GET  /api/v1/pools/{pool}                           one pool
//	POST /api/v1/pools/{pool}/backends/{addr}/disable   manual disable (breaker rule 5)
//	POST /api/v1/pools/{pool}/backends/{addr}/enable    undo it and any drain; an open breaker probes
//	                                                    at once (?scope=local in a fleet: this
//	                                                    instance's own drain only)
//	POST /api/v1/pools/{pool}/backends/{addr}/probe     run the open breaker's recovery probe
//	                                                    now (202; it decides in the background;
//	                                                    409 when closed or disabled)
//	POST /api/v1/pools/{pool}/backends/{addr}/drain     no new connections; reset at ?timeout= (202)
//	POST /api/v1/pools/{pool}/backends/{addr}/weight    the weight new picks use (?value=N)
//	                                                    (both: &scope=local|fleet; in a fleet the
//	                                                    default is every instance, shared.go)
//	POST /api/v1/pools/{pool}/backends                  add a backend ({"addr":...}; 201, the pool)
//	DELETE /api/v1/pools/{pool}/backends/{addr}         drain and remove one the API added (202)
//	POST /api/v1/reload                                 re-read the configuration file
//
// Adding and removing backends is the Membership's (membership.go); an
// endpoint without one answers those two routes 501.
//
// The backend routes answer with the backend's state; an unknown pool or
// backend is 404, and every error is a JSON object {"error": "..."}.
//
// Metrics are read at scrape time from the counters the data path keeps
// anyway (atomics in pkg/pool, pkg/server, pkg/splice), so serving traffic
// costs nothing extra for them.
//
// Guards:
//   - The API refuses any request that could come from a browser page (an
//     Origin header, a Host that is not an IP literal or localhost, a
//     request line naming a host), so a web page cannot disable backends by
//     CSRF or DNS rebinding.
//   - With admin.token_file set, every request that acts (POST) needs
//     "Authorization: Bearer <token>" (401 otherwise); reads and /metrics
//     stay open.
//   - At most admin.max_connections connections are open at once; past
//     that a connection is closed at once and counted in
//     l4lb_admin_connections_rejected_total, so the endpoint cannot take
//     the data path's file descriptors. Idle connections are closed after
//     a few seconds (no request) or 30s (keep-alive).
//
// The endpoint binds exactly the address configured: 0.0.0.0 is IPv4 only,
// [::] IPv6 only. Beyond loopback it warns at start, since whoever reaches
// it can disable backends.
package admin
