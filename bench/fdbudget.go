package main

import "golang.org/x/sys/unix"

// fdReserve is kept aside from RLIMIT_NOFILE for listeners, pipes of active
// transfers, log files and the runtime.
const fdReserve = 1000

// maxIdleConns caps the idle scenario: 9,000 is what the 20,000-fd machine
// allows a 2-fd-per-connection proxy, and the anchor figures use it.
const maxIdleConns = 9000

// nofileLimit is the soft RLIMIT_NOFILE children inherit.
func nofileLimit() uint64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return r.Cur
}

// idleBudget is how many idle proxied connections a proxy that holds
// fdsPerConn descriptors per connection can keep under limit, rounded down
// to a multiple of 500 and capped at capN.
func idleBudget(limit uint64, fdsPerConn, capN int) int {
	if fdsPerConn <= 0 || limit <= fdReserve {
		return 0
	}
	n := int(limit-fdReserve) / fdsPerConn
	n -= n % 500
	return max(0, min(n, capN))
}

// haproxyMaxconn keeps HAProxy's computed maxsock (2 per connection plus
// 2 per pipe plus a few) under limit, as ../shared/bench-method.md §3 does.
func haproxyMaxconn(limit uint64, maxpipes int) int {
	n := (int(limit) - 2*maxpipes - 500) / 2
	return max(n, 100)
}

// nginxWorkerConnections counts both legs of a proxied connection, so it is
// the fd limit minus a reserve.
func nginxWorkerConnections(limit uint64) int {
	return max(int(limit)-500, 100)
}
