package config

import "time"

// Floors and ceilings of the duration and count keys (issue 25), each the
// one statement of its fact: the schema (schema.go) gives it to its key,
// Parse enforces it from there, and the generated docs/configuration.md
// quotes it. Like the bounds below and those of policy.go, they refuse values that are certainly
// mistakes (a health check that dials without rest, a timer that
// re-arms itself without end, a limit the code would silently lower),
// not merely unusual ones; the keys they bound keep their zero meanings
// ("0s": off, 0: the kernel's or l4lb's own choice) where they have one.
//
// The common floor of the timers is 10ms: below it a timer measures the
// host, not the backend (a loaded host's run-queue delay, a GC pause or
// an event loop busy with other connections are that long), and for
// timers that repeat per backend (checks, probes) it caps their rate at
// 100 a second each.
const (
	// MinCheckInterval is the least [pool.NAME.health] interval: "1ns"
	// would dial every backend as fast as the prober can loop.
	MinCheckInterval = 10 * time.Millisecond
	// MaxCheckInterval is the longest: a backend checked less often than
	// hourly is not health-checked at all (enabled = false says so).
	MaxCheckInterval = time.Hour
	// MinCheckTimeout is the least [pool.NAME.health] timeout (at most
	// interval): shorter fails healthy backends on scheduling delay alone.
	MinCheckTimeout = 10 * time.Millisecond

	// MinConnectTimeout is the least connect_timeout and connect_budget of
	// a TCP pool, and reply_timeout of a UDP one: below it a backend that
	// answers in a few milliseconds counts as failed, and every client
	// dial feeds the breaker.
	MinConnectTimeout = 10 * time.Millisecond
	// MinDiscoveryRefresh is the least [pool.NAME.discovery] min_refresh:
	// a pool is not rebuilt more often than this; MaxDiscoveryRefresh the
	// longest refresh (and grace) worth a key.
	MinDiscoveryRefresh = 100 * time.Millisecond
	MaxDiscoveryRefresh = 24 * time.Hour
	// MinDiscoveryTimeout is the least time one DNS query may take.
	MinDiscoveryTimeout = 10 * time.Millisecond

	// MinIdleTimeout is the least idle_timeout of a TCP pool and
	// session_timeout of a UDP listener: silence shorter than one
	// ordinary exchange (a backend's think time, a WAN round trip) would
	// cut live relays, and while a slow peer drains the idle timer re-arms
	// every idle_timeout.
	MinIdleTimeout = 100 * time.Millisecond

	// MinBreakerWindow is the least [pool.NAME.breaker] window: a window
	// of nanoseconds holds one failed dial at a time, so a breaker that
	// needs several never trips.
	MinBreakerWindow = 10 * time.Millisecond
	// MinCooldown is the least cooldown and max_cooldown: a tripped
	// backend is probed once a cooldown, so "1ns" probes it without rest.
	MinCooldown = 10 * time.Millisecond
	// MinEarlyResetWindow is the least early_reset_window: much shorter
	// judges a dial a success before a crashing server's reset is likely
	// to arrive, and count_early_reset does nothing.
	MinEarlyResetWindow = 10 * time.Millisecond

	// MinPipeSize is one page: F_SETPIPE_SZ cannot go lower.
	MinPipeSize = 4096
	// MaxPipeSize is 1 GiB, what F_SETPIPE_SZ takes at most as root; an
	// unprivileged process is held to /proc/sys/fs/pipe-max-size (1 MiB by
	// default) whatever it asks. Not lower: a ceiling that refuses a file
	// which loaded before makes the next binary upgrade fail to start.
	MaxPipeSize = 1 << 30

	// MaxBacklog is what listen(2) takes, an int. pkg/listener asks for
	// no more than 65535 and the kernel caps any backlog at
	// net.core.somaxconn, both documented; not lower, since tuning guides
	// write 131072 and a ceiling that refuses a file which loaded before
	// makes the next binary upgrade fail to start.
	MaxBacklog = 1<<31 - 1

	// MaxClientConnections bounds [global] max_connections: each client
	// connection holds two fds (client and backend), and no fd limit goes
	// past fs.nr_open's maximum, just under 1<<31, so more could never be
	// open; near math.MaxInt the fd budget's arithmetic would overflow.
	MaxClientConnections = 1 << 30
)

// Bounds of the [cluster] keys.
const (
	MinSyncInterval = 100 * time.Millisecond
	MaxSyncInterval = time.Hour
	MinStoreTimeout = 10 * time.Millisecond // and below sync_interval
	MaxKeyPrefixLen = 64                    // bytes
	MaxInstanceLen  = 128                   // bytes
	MaxTripQuorum   = 1000                  // instances; a fleet past it shards its Redis anyway
)

// Bounds of the numeric keys. They reject values that are certainly
// mistakes (or would make l4lb allocate absurd amounts of memory), not
// merely unusual ones.
const (
	MaxEventLoops      = 1024
	MaxBusyPoll        = time.Millisecond // past it a loop burns a CPU for nothing a sleep would not give
	MaxWakeCoalesce    = time.Millisecond // past it the added latency outweighs any batching
	MaxRetries         = 16               // each retry costs the client up to connect_timeout
	MaxWeight          = 256
	MaxRingVnodes      = 10000
	MaxRingPoints      = 1 << 22    // ring_vnodes x total weight: pkg/hashring's bound on a ring
	MaxMaglevTableSize = 10_000_019 // prime; Maglev tables are M entries per pool
	MaxRiseFall        = 1000
	MaxBreakerCount    = 1_000_000 // failures, successes, min_volume
	MaxAdminConns      = 65536
	MaxUDPSessions     = 1_000_000 // max_sessions of one UDP listener: a socket (an fd) each
	// MinAccessInterval bounds access_interval from below: more often,
	// a long flow's lines outnumber what they tell.
	MinAccessInterval = time.Second
	// MaxDuration bounds every duration key: longer is no setting, and near
	// Go's largest (2562047h) the nanosecond clocks it is added to overflow.
	MaxDuration = 876000 * time.Hour // 100 years
)
