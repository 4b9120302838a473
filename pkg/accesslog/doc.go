// Package accesslog writes the access log: one line per ended client
// connection (listener, pool, client, backend, bytes each way, duration,
// how it ended), as JSON or logfmt text, to standard error or to a file
// reopened when rotation moves it; or to syslog, one message a record
// (syslog.go, pkg/syslog).
//
// The event loops never format or write: each hands fixed-size records
// (Record) to a lock-free ring of its own in the Queue (queue.go), and
// one writer goroutine here drains the rings, formats the lines and
// writes them whole. A ring that is full drops the record and counts it,
// so a slow disk never holds up the data path. The TCP relay
// (pkg/relay) imports this package, never the reverse.
package accesslog
