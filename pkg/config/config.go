package config

import "time"

// Config is one validated configuration file.
type Config struct {
	Global    Global
	Admin     Admin
	Log       Log
	Cluster   Cluster
	Listeners []Listener       // in file order
	Pools     map[string]*Pool // by name
	PoolNames []string         // sorted, for deterministic iteration

	// Where the file came from, so that checks made after Parse (CheckHost)
	// report problems with their key's line like Parse does.
	file string
	pos  *positions
}

// Global holds process-wide settings ([global]).
type Global struct {
	// ShutdownTimeout is how long open relays get to finish after SIGTERM;
	// 0 closes them at once.
	ShutdownTimeout time.Duration
	// MaxConnections caps concurrent client connections; 0 asks the caller
	// to derive the cap from RLIMIT_NOFILE.
	MaxConnections int
	// EventLoops is the number of event loops, each with its own
	// SO_REUSEPORT socket per listener; 0 asks the caller for one per CPU.
	// The older key accept_loops sets it too, when event_loops is absent.
	EventLoops int
	// PipeSize is the size in bytes of each splice pipe (F_SETPIPE_SZ).
	PipeSize int
}

// Admin is the metrics and admin API endpoint ([admin]).
type Admin struct {
	Listen string // host:port; "" turns the endpoint off
	// TokenFile holds a bearer token that POST routes then require; ""
	// leaves them open (the endpoint should then stay on loopback).
	TokenFile string
	// MaxConnections caps admin connections open at once, so scrapes and
	// API calls can never eat the data path's file descriptors.
	MaxConnections int
}

// Log selects the process logger and the access log ([log]).
type Log struct {
	Level  string // debug | info | warn | error
	Format string // text | json
	// Access is the access log's format: off | text | json. On, it writes
	// one line per ended TCP client connection, refused ones included.
	Access string
	// AccessFile is the file access lines are appended to; "": standard
	// error.
	AccessFile string
}

// Listener is one [[listener]] table.
type Listener struct {
	Name     string
	Bind     string // host:port as written; the host is an IP literal
	Protocol string // tcp | udp
	Pool     string // name of a pool in Config.Pools
	Backlog  int    // 0: the kernel's somaxconn (tcp only)
	Line     int    // line of the [[listener]] header, for later error messages

	// UDP listeners only: a session is the datagrams of one client
	// address and port, relayed through one connected socket to one
	// backend.
	SessionTimeout time.Duration // a session idle this long ends
	MaxSessions    int           // sessions at once; at the cap the longest-idle is evicted
	Responses      int           // 0: unlimited; else a session ends after this many backend datagrams
	Requests       int           // 0: unlimited; else a session takes this many client datagrams, the next starts a new one
	// ReuseSockets: a session that ended cleanly (one datagram, exactly
	// its Responses) leaves its backend socket for the next session to
	// that backend. Off by default: a backend that sends more than
	// Responses could reach the next client.
	ReuseSockets bool
}

// Pool is one [pool.NAME] table with its backends, health and breaker.
type Pool struct {
	Name              string
	Algorithm         string
	HashKey           string
	ConnectTimeout    time.Duration
	ConnectBudget     time.Duration // all attempts of one client together (>= ConnectTimeout)
	IdleTimeout       time.Duration
	Retries           int
	SlowStart         time.Duration // 0: off
	HashBalanceFactor float64       // 0: off, else > 1
	RingVnodes        int
	MaglevTableSize   int
	Backends          []Backend // in file order
	// Protocol is that of the listeners naming the pool ("tcp" when none
	// does); a pool serves one protocol.
	Protocol string
	// ReplyTimeout (UDP pools): how long a session's first datagram waits
	// for the backend's reply before the dial is settled (a failure only
	// with Breaker.CountNoReply).
	ReplyTimeout time.Duration
	Health       Health
	Breaker      Breaker
	Line         int // line of the [pool.NAME] header (or its first key)
}

// Backend is one [[pool.NAME.backend]] table.
type Backend struct {
	Addr   string // host:port as written; the host is an IP literal
	Weight int    // 0..256; 0 takes no new connections
	ID     string // identity for hashing; "" means Addr
	Line   int    // line of the [[pool.NAME.backend]] header
}

// Identity is the name the backend is hashed by: its ID, or its Addr when
// no ID is set. Keeping an explicit ID lets an operator move a backend to a
// new address without reshuffling consistent-hash and Maglev placement.
func (b Backend) Identity() string {
	if b.ID != "" {
		return b.ID
	}
	return b.Addr
}

// Health configures the active checks of a pool.
type Health struct {
	Enabled bool
	// Type is "connect" (a TCP connect; for UDP pools to Port) or
	// "send-expect" (send Send, pass when the reply starts with Expect;
	// over the pool's protocol).
	Type string
	// Port (connect checks of UDP pools): the TCP port to connect to; 0:
	// the backend's own port.
	Port int
	// Send and Expect are the decoded bytes of send/send_hex and
	// expect/expect_hex. An empty Expect passes on any reply (one byte at
	// least over TCP).
	Send, Expect []byte
	Interval     time.Duration
	Timeout      time.Duration
	Rise         int // consecutive successes that bring a backend up
	Fall         int // consecutive failures that take it down
}

// Breaker configures the connect-failure circuit breaker of a pool.
type Breaker struct {
	Failures        int           // failed dials within Window that trip it
	Window          time.Duration // sliding window for counting failures
	MinRatio        float64       // 0: off; else also require this failure ratio
	MinVolume       int           // over at least this many dials in Window
	Cooldown        time.Duration // first cooldown after a trip
	MaxCooldown     time.Duration // cap of the doubled cooldown
	Successes       int           // post-trip successes needed to close
	CountEarlyReset bool          // an RST before the backend's first byte is a failure
	// EarlyResetWindow bounds "early": a backend silent this long after the
	// connect has accepted the dial, whatever it does later.
	EarlyResetWindow time.Duration
	// CountNoReply (UDP pools): a session's first datagram left without a
	// reply for ReplyTimeout is a failed dial. Off by default: many UDP
	// protocols are one-way.
	CountNoReply bool
}
