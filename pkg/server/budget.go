package server

import (
	"syscall"

	"github.com/l4lb/l4lb/pkg/config"
)

// FDBudget splits the process's file descriptors between client
// connections and everything else.
type FDBudget struct {
	Limit    int // RLIMIT_NOFILE (soft; Go raises it to the hard limit)
	MaxPipes int // splice pipes in existence at most (2 fds each)
	Sessions int // UDP sessions at most, over all UDP listeners (1 fd each); part of Reserved
	Reserved int // fds kept for everything but relayed connections
	// ConnCap is max_connections: client connections (2 fds each:
	// client + backend), derived from Limit when the file leaves it at 0.
	ConnCap
}

// baseReserve covers stdio, the netpoller, the admin endpoint's listening
// socket, logs and the odd file. The admin endpoint's connections are
// reserved on top, by its own cap.
const baseReserve = 64

// maxPipes bounds pipes: each is held only while a direction has data in
// flight, so a few hundred serve thousands of connections; past the cap
// relays copy instead.
const maxPipes = 256

// DeriveBudget computes max_connections from the fd limit when the
// configuration leaves it at 0. sockets is the number of listening sockets
// (TCP and UDP), backends the number of backends (a health check and a
// breaker probe each may hold an fd), adminConns the admin endpoint's
// connection cap (see AdminConns): scrapes and API calls then never take
// fds relayed clients were promised. sessions is the sum of the UDP
// listeners' max_sessions (see UDPSessions): each session holds its
// connected socket to the backend, so they are kept apart too.
func DeriveBudget(limit, configured, sockets, backends, adminConns, sessions int) FDBudget {
	b := FDBudget{Limit: limit, MaxPipes: min(maxPipes, max(limit/16, 8)), Sessions: sessions}
	b.Reserved = baseReserve + sockets + 2*backends + 2*b.MaxPipes + adminConns + sessions
	b.MaxConnections, b.Derived = configured, configured == 0
	if b.Derived {
		b.MaxConnections = max((limit-b.Reserved)/2, 1)
	}
	return b
}

// Needed is how many fds the budget may hold at once.
func (b FDBudget) Needed() int { return b.Reserved + 2*b.MaxConnections }

// OverLimit says, when the budget needs more fds than the limit allows, what
// to log at start (a warning: l4lb still runs, and what does not fit is
// refused when it comes), else "".
func (b FDBudget) OverLimit() string {
	if b.Needed() <= b.Limit {
		return ""
	}
	if b.Sessions > 0 {
		return "max_connections and the UDP listeners' max_sessions need more file descriptors than the limit allows; raise LimitNOFILE or lower them"
	}
	return "max_connections needs more file descriptors than the limit allows; raise LimitNOFILE"
}

// UDPSessions is how many UDP sessions cfg allows at once: the sum of its
// UDP listeners' max_sessions, one socket each.
func UDPSessions(cfg *config.Config) int {
	n := 0
	for _, l := range cfg.Listeners {
		if l.Protocol == config.ProtocolUDP {
			n += l.MaxSessions
		}
	}
	return n
}

// AdminConns is how many fds the admin endpoint may hold at once: its
// connection cap, plus the one it holds for an instant to close a
// connection past the cap (pkg/admin accepts and closes those); none when
// the endpoint is off.
func AdminConns(a config.Admin) int {
	if a.Listen == "" {
		return 0
	}
	return a.MaxConnections + 1
}

// NofileLimit is the process's RLIMIT_NOFILE (soft), 1024 when it cannot
// be read.
func NofileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	if rl.Cur > 1<<30 {
		return 1 << 30
	}
	return int(rl.Cur)
}

// BudgetFor is the budget of cfg's listeners, pools and max_connections
// served by loops event loops beside the admin endpoint admin (the
// running one: a reload keeps it), at this process's fd limit.
func BudgetFor(cfg *config.Config, loops int, admin config.Admin) FDBudget {
	backends := 0
	for _, p := range cfg.Pools {
		backends += len(p.Backends)
	}
	return DeriveBudget(NofileLimit(), cfg.Global.MaxConnections, loops*len(cfg.Listeners), backends, AdminConns(admin), UDPSessions(cfg))
}
