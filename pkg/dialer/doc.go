// Package dialer connects to backends and says whose fault a failed connect
// was.
//
// A Dialer makes the blocking dials of the pool's own goroutines (the
// breaker's recovery probes, the health checks); the event loops connect
// clients to backends themselves, without blocking, and judge the result
// with Classify and IsTimeout.
//
// A failed dial is the backend's fault (Failure) when the connect is refused,
// reset, unreachable or times out. It is local trouble (Local), which never
// counts against a backend, when this host ran out of something (file
// descriptors, local ports, buffers, memory) or when the dial was called off
// because the client left or l4lb is shutting down.
package dialer
