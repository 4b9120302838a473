package config

import "time"

// Algorithm names accepted in [pool.NAME] algorithm.
const (
	AlgorithmRoundRobin         = "round-robin"
	AlgorithmWeightedRoundRobin = "weighted-round-robin"
	AlgorithmLeastConn          = "least-conn"
	AlgorithmRandom             = "random"
	AlgorithmP2C                = "p2c"
	AlgorithmIPHash             = "ip-hash"
	AlgorithmConsistentHash     = "consistent-hash"
	AlgorithmMaglev             = "maglev"
)

// Hash key names accepted in [pool.NAME] hash_key.
const (
	HashKeySourceIP     = "source-ip"
	HashKeySourceIPPort = "source-ip-port"
)

// Protocol names accepted in [[listener]] protocol.
const (
	ProtocolTCP = "tcp"
	ProtocolUDP = "udp"
)

// Health check types accepted in [pool.NAME.health] type.
const (
	HealthConnect    = "connect"
	HealthSendExpect = "send-expect"
	// HealthICMP (UDP pools, their default): one empty datagram that fails
	// on an ICMP error (port or host unreachable) and passes otherwise.
	HealthICMP = "icmp"
)

// Algorithms lists every accepted algorithm, in documentation order.
func Algorithms() []string {
	return []string{
		AlgorithmRoundRobin, AlgorithmWeightedRoundRobin, AlgorithmLeastConn,
		AlgorithmRandom, AlgorithmP2C, AlgorithmIPHash,
		AlgorithmConsistentHash, AlgorithmMaglev,
	}
}

// HashKeys lists every accepted hash_key.
func HashKeys() []string { return []string{HashKeySourceIP, HashKeySourceIPPort} }

// Protocols lists the accepted [[listener]] protocol values.
func Protocols() []string { return []string{ProtocolTCP, ProtocolUDP} }

// HealthTypes lists the accepted [pool.NAME.health] type values.
func HealthTypes() []string { return []string{HealthConnect, HealthSendExpect, HealthICMP} }

// LogLevels lists the accepted [log] level values.
func LogLevels() []string { return []string{"debug", "info", "warn", "error"} }

// LogFormats lists the accepted [log] format values.
func LogFormats() []string { return []string{"text", "json"} }

// AccessOff is [log] access's default: no access log.
const AccessOff = "off"

// AccessFormats lists the accepted [log] access values.
func AccessFormats() []string { return []string{AccessOff, "text", "json"} }

// Stores accepted in [cluster] store.
const (
	// StoreMemory keeps breaker state and manual disables in this
	// process: the default, for an l4lb on its own.
	StoreMemory = "memory"
	// StoreRedis keeps them in Redis, shared by every l4lb using it.
	StoreRedis = "redis"
)

// Stores lists the accepted [cluster] store values.
func Stores() []string { return []string{StoreMemory, StoreRedis} }

// RedisSchemes lists the URL schemes accepted in [cluster] redis_url:
// rediss and valkeys are TLS, unix a socket path (unix:///run/redis.sock).
func RedisSchemes() []string { return []string{"redis", "rediss", "unix", "valkey", "valkeys"} }

// Bounds of the [cluster] keys.
const (
	MinSyncInterval = 100 * time.Millisecond
	MaxSyncInterval = time.Hour
	MinStoreTimeout = 10 * time.Millisecond // and below sync_interval
	MaxKeyPrefixLen = 64                    // bytes
	MaxInstanceLen  = 128                   // bytes
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
	// MaxDuration bounds every duration key: longer is no setting, and near
	// Go's largest (2562047h) the nanosecond clocks it is added to overflow.
	MaxDuration = 876000 * time.Hour // 100 years
)

// DefaultWakeCoalesce is [global] wake_coalesce when the file leaves it
// out: measured on the bench's redis scenario (docs/design.md, "Wake-up
// coalescing").
const DefaultWakeCoalesce = 20 * time.Microsecond

// DefaultGlobal returns [global] with every key at its default.
func DefaultGlobal() Global {
	return Global{
		ShutdownTimeout: 30 * time.Second,
		MaxConnections:  0,
		EventLoops:      0,
		PipeSize:        1 << 20,
		WakeCoalesce:    DefaultWakeCoalesce,
	}
}

// DefaultAdmin returns [admin] with every key at its default.
func DefaultAdmin() Admin { return Admin{Listen: "127.0.0.1:9090", MaxConnections: 64} }

// DefaultLog returns [log] with every key at its default.
func DefaultLog() Log { return Log{Level: "info", Format: "text", Access: AccessOff} }

// DefaultCluster returns [cluster] with every key at its default. Instance
// stays "": the caller fills in its own (hostname-pid) when the file sets
// none.
func DefaultCluster() Cluster {
	return Cluster{
		Store:        StoreMemory,
		KeyPrefix:    "l4lb:",
		SyncInterval: 2 * time.Second,
		Timeout:      250 * time.Millisecond,
	}
}

// DefaultListener returns a [[listener]] with the optional keys at their
// defaults; name, bind and pool have none.
func DefaultListener() Listener {
	return Listener{Protocol: ProtocolTCP, SessionTimeout: 60 * time.Second, MaxSessions: DefaultMaxSessions, ProxyTimeout: DefaultProxyTimeout,
		SourceIPv4Prefix: DefaultSourceIPv4Prefix, SourceIPv6Prefix: DefaultSourceIPv6Prefix}
}

// DefaultMaxSessions is a UDP listener's max_sessions when the file does
// not set it. Each session holds one socket (an fd).
const DefaultMaxSessions = 4096

// DefaultBackend returns a [[pool.NAME.backend]] with the optional keys at
// their defaults; addr has none.
func DefaultBackend() Backend { return Backend{Weight: 1} }

// DefaultHealth returns [pool.NAME.health] with every key at its default.
func DefaultHealth() Health {
	return Health{
		Enabled:  true,
		Type:     HealthConnect,
		Interval: 2 * time.Second,
		Timeout:  1 * time.Second,
		Rise:     2,
		Fall:     3,
	}
}

// DefaultBreaker returns [pool.NAME.breaker] with every key at its default.
func DefaultBreaker() Breaker {
	return Breaker{
		Failures:         3,
		Window:           120 * time.Second,
		MinRatio:         0,
		MinVolume:        0,
		Cooldown:         30 * time.Second,
		MaxCooldown:      5 * time.Minute,
		Successes:        1,
		CountEarlyReset:  false,
		EarlyResetWindow: 5 * time.Second,
	}
}

// DefaultConnectBudget is connect_budget when the file does not set it; a
// pool whose connect_timeout is longer gets its connect_timeout instead, so
// raising the one never makes the other an error.
const DefaultConnectBudget = 5 * time.Second

// DefaultPool returns a pool named name with every key at its default and
// no backends.
func DefaultPool(name string) *Pool {
	return &Pool{
		Name:              name,
		Algorithm:         AlgorithmRoundRobin,
		HashKey:           HashKeySourceIP,
		ConnectTimeout:    2 * time.Second,
		ConnectBudget:     DefaultConnectBudget,
		IdleTimeout:       10 * time.Minute,
		Retries:           2,
		SlowStart:         0,
		HashBalanceFactor: 0,
		RingVnodes:        160,
		MaglevTableSize:   65537,
		Protocol:          ProtocolTCP,
		ReplyTimeout:      2 * time.Second,
		Health:            DefaultHealth(),
		Breaker:           DefaultBreaker(),
		ProxyProtocol:     ProxyProtocolOff,
	}
}
