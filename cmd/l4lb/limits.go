package main

import (
	"syscall"
)

// fdBudget splits the process's file descriptors between client
// connections and everything else.
type fdBudget struct {
	Limit          int // RLIMIT_NOFILE (soft; Go raises it to the hard limit)
	MaxPipes       int // splice pipes in existence at most (2 fds each)
	Reserved       int // fds kept for everything but relayed connections
	MaxConnections int // client connections (2 fds each: client + backend)
}

// baseReserve covers stdio, the netpoller, the admin endpoint and its
// scrapes, logs and the odd file.
const baseReserve = 64

// maxPipes bounds pipes: each is held only while a direction has data in
// flight, so a few hundred serve thousands of connections; past the cap
// relays copy instead.
const maxPipes = 256

// deriveBudget computes max_connections from the fd limit when the
// configuration leaves it at 0. sockets is the number of listening sockets,
// backends the number of backends (a health check and a breaker probe each
// may hold an fd).
func deriveBudget(limit, configured, sockets, backends int) fdBudget {
	b := fdBudget{Limit: limit, MaxPipes: min(maxPipes, max(limit/16, 8))}
	b.Reserved = baseReserve + sockets + 2*backends + 2*b.MaxPipes
	b.MaxConnections = configured
	if configured == 0 {
		b.MaxConnections = max((limit-b.Reserved)/2, 1)
	}
	return b
}

func nofileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	if rl.Cur > 1<<30 {
		return 1 << 30
	}
	return int(rl.Cur)
}
