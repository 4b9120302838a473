// Package accesslog writes the access log: one line per ended client
// connection and UDP session (listener, pool, client, backend, bytes
// each way, duration, how it ended), and on request lines of open ones
// (when the backend connection is established; interim, every
// access_interval), as JSON or logfmt text, to standard error or to a
// file reopened when rotation moves it; or to syslog, one message a
// record (syslog.go, pkg/syslog).
//
// The event loops never format or write: each hands fixed-size records
// (Record) to a lock-free ring of its own in the Queue (queue.go), and
// one writer goroutine here drains the rings, formats the lines and
// writes them whole. A ring that is full drops the record and counts it,
// so a slow disk never holds up the data path. A loop spreads its interim
// records over the interval with a Schedule (interim.go). The TCP relay
// (pkg/relay) and the UDP sessions (pkg/udpsession) import this package,
// never the reverse.
package accesslog
