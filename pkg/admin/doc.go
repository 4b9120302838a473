// Package admin serves l4lb's operator endpoint: Prometheus metrics on
// /metrics and the JSON admin API on /api/v1 (pool state, manual disable
// and enable of backends).
//
// Metrics are read at scrape time from the counters the data path keeps
// anyway (atomics in pkg/pool, pkg/proxy, pkg/splice), so serving traffic
// costs nothing extra for them. The API refuses any request that could come
// from a browser page (an Origin header, or a Host that is not an IP literal
// or localhost), so a web page cannot disable backends by CSRF or DNS
// rebinding.
package admin
