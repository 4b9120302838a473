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
	// HashKeySNI hashes the TLS server name the listener's route
	// inspection read (routes.go); a client without one hashes by its
	// source IP.
	HashKeySNI = "sni"
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
	// HealthTLS (TCP pools): a TCP connect and a TLS handshake with
	// server_name, the certificate verified against ca_file when set.
	HealthTLS = "tls"
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
func HashKeys() []string { return []string{HashKeySourceIP, HashKeySourceIPPort, HashKeySNI} }

// Protocols lists the accepted [[listener]] protocol values.
func Protocols() []string { return []string{ProtocolTCP, ProtocolUDP} }

// HealthTypes lists the accepted [pool.NAME.health] type values.
func HealthTypes() []string { return []string{HealthConnect, HealthSendExpect, HealthICMP, HealthTLS} }

// LogLevels lists the accepted [log] level values.
func LogLevels() []string { return []string{"debug", "info", "warn", "error"} }

// LogFormats lists the accepted [log] format values.
func LogFormats() []string { return []string{"text", "json"} }

// AccessOff is [log] access's default: no access log.
const AccessOff = "off"

// AccessSyslog is [log] access's value sending records to [log] syslog.
const AccessSyslog = "syslog"

// AccessFormats lists the accepted [log] access values.
func AccessFormats() []string { return []string{AccessOff, "text", "json", AccessSyslog} }

// [log] process values: where the process log goes.
const (
	ProcessStderr = "stderr"
	ProcessSyslog = "syslog"
)

// ProcessOutputs lists the accepted [log] process values.
func ProcessOutputs() []string { return []string{ProcessStderr, ProcessSyslog} }

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

// DefaultWakeCoalesce is [global] wake_coalesce when the file leaves it
// out: measured on the bench's redis scenario (docs/architecture.md, "Wake-up
// coalescing").
const DefaultWakeCoalesce = 20 * time.Microsecond

// DefaultMaxSessions is a UDP listener's max_sessions when the file does
// not set it. Each session holds one socket (an fd).
const DefaultMaxSessions = 4096

// The Default* functions below give each table with every key at its
// schema default: what Parse starts from before it reads the file.

// DefaultGlobal returns [global] with every key at its default.
func DefaultGlobal() Global {
	return Global{
		ShutdownTimeout:     def[time.Duration]("global.shutdown_timeout"),
		UpgradeDrainTimeout: def[time.Duration]("global.upgrade_drain_timeout"),
		MaxConnections:      def[int]("global.max_connections"),
		EventLoops:          def[int]("global.event_loops"),
		PipeSize:            def[int]("global.pipe_size"),
		BusyPoll:            def[time.Duration]("global.busy_poll"),
		WakeCoalesce:        def[time.Duration]("global.wake_coalesce"),
		StateFile:           def[string]("global.state_file"),
	}
}

// DefaultAdmin returns [admin] with every key at its default.
func DefaultAdmin() Admin {
	return Admin{
		Listen:         def[string]("admin.listen"),
		TokenFile:      def[string]("admin.token_file"),
		MaxConnections: def[int]("admin.max_connections"),
	}
}

// DefaultLog returns [log] with every key at its default.
func DefaultLog() Log {
	return Log{
		Level:          def[string]("log.level"),
		Format:         def[string]("log.format"),
		Access:         def[string]("log.access"),
		AccessFile:     def[string]("log.access_file"),
		Process:        def[string]("log.process"),
		Syslog:         def[string]("log.syslog"),
		SyslogFormat:   def[string]("log.syslog_format"),
		SyslogFacility: def[string]("log.syslog_facility"),

		AccessInterval:  def[time.Duration]("log.access_interval"),
		AccessOnConnect: def[bool]("log.access_on_connect"),
	}
}

// DefaultCluster returns [cluster] with every key at its default. Instance
// stays "": the caller fills in its own (hostname-pid) when the file sets
// none. SentinelAddrs and RedisAddrs stay nil, as when the file leaves it out.
func DefaultCluster() Cluster {
	return Cluster{
		Store:          def[string]("cluster.store"),
		PasswordFile:   def[string]("cluster.password_file"),
		TLSCAFile:      def[string]("cluster.tls_ca_file"),
		TLSCertFile:    def[string]("cluster.tls_cert_file"),
		TLSKeyFile:     def[string]("cluster.tls_key_file"),
		TLSServerName:  def[string]("cluster.tls_server_name"),
		SentinelMaster: def[string]("cluster.sentinel_master"),
		KeyPrefix:      def[string]("cluster.key_prefix"),
		SyncInterval:   def[time.Duration]("cluster.sync_interval"),
		Timeout:        def[time.Duration]("cluster.timeout"),
		Instance:       def[string]("cluster.instance"),
		TripQuorum:     def[int]("cluster.trip_quorum"),
	}
}

// DefaultListener returns a [[listener]] with the optional keys at their
// defaults; name, bind and pool have none, and the lists (allow, deny)
// stay nil, as when the file leaves them out.
func DefaultListener() Listener {
	const l = "listener."
	return Listener{
		Protocol:          def[string](l + "protocol"),
		Backlog:           def[int](l + "backlog"),
		SessionTimeout:    def[time.Duration](l + "session_timeout"),
		MaxSessions:       def[int](l + "max_sessions"),
		Responses:         def[int](l + "responses"),
		Requests:          def[int](l + "requests"),
		ReuseSockets:      def[bool](l + "reuse_sockets"),
		ReceiveBuffer:     def[int](l + "receive_buffer"),
		AccessLog:         def[bool](l + "access_log"),
		AcceptProxy:       def[bool](l + "accept_proxy"),
		ProxyTimeout:      def[time.Duration](l + "proxy_timeout"),
		MaxConnsPerSource: def[int](l + "max_connections_per_source"),
		RatePerSource:     def[float64](l + "rate_per_source"),
		BurstPerSource:    def[int](l + "burst_per_source"),
		SourceIPv4Prefix:  def[int](l + "source_ipv4_prefix"),
		SourceIPv6Prefix:  def[int](l + "source_ipv6_prefix"),
		Keepalive:         def[time.Duration](l + "keepalive"),
		KeepaliveInterval: def[time.Duration](l + "keepalive_interval"),
		KeepaliveCount:    def[int](l + "keepalive_count"),
		InspectTimeout:    def[time.Duration](l + "inspect_timeout"),
		OnUnrecognized:    def[string](l + "on_unrecognized"),
		OnTooLarge:        def[string](l + "on_too_large"),
	}
}

// DefaultBackend returns a [[pool.NAME.backend]] with the optional keys at
// their defaults; addr has none.
func DefaultBackend() Backend {
	const b = backendPath + "."
	return Backend{
		Weight:         def[int](b + "weight"),
		ID:             def[string](b + "id"),
		MaxConnections: def[int](b + "max_connections"),
		Backup:         def[bool](b + "backup"),
	}
}

// The [pool.NAME.discovery] family values.
const (
	FamilyAny  = "any"
	FamilyIPv4 = "ipv4"
	FamilyIPv6 = "ipv6"
)

// Families lists the accepted [pool.NAME.discovery] family values.
func Families() []string { return []string{FamilyAny, FamilyIPv4, FamilyIPv6} }

// DefaultDiscovery returns [pool.NAME.discovery] with every key at its
// default; dns and srv have none.
func DefaultDiscovery() Discovery {
	const d = discoveryPath + "."
	return Discovery{
		Timeout:        def[time.Duration](d + "timeout"),
		MinRefresh:     def[time.Duration](d + "min_refresh"),
		MaxRefresh:     def[time.Duration](d + "max_refresh"),
		EmptyGrace:     def[time.Duration](d + "empty_grace"),
		Family:         def[string](d + "family"),
		Weight:         def[int](d + "weight"),
		MaxConnections: def[int](d + "max_connections"),
		Backup:         def[bool](d + "backup"),
	}
}

// DefaultHealth returns [pool.NAME.health] with every key at its default
// (a UDP pool's type is "icmp" unless the file names one: see decodePool).
func DefaultHealth() Health {
	const h = healthPath + "."
	return Health{
		Enabled:  def[bool](h + "enabled"),
		Type:     def[string](h + "type"),
		Port:     def[int](h + "port"),
		CAFile:   def[string](h + "ca_file"),
		Interval: def[time.Duration](h + "interval"),
		Timeout:  def[time.Duration](h + "timeout"),
		Rise:     def[int](h + "rise"),
		Fall:     def[int](h + "fall"),
	}
}

// DefaultBreaker returns [pool.NAME.breaker] with every key at its default.
func DefaultBreaker() Breaker {
	const b = breakerPath + "."
	return Breaker{
		Failures:         def[int](b + "failures"),
		Window:           def[time.Duration](b + "window"),
		MinRatio:         def[float64](b + "min_ratio"),
		MinVolume:        def[int](b + "min_volume"),
		Cooldown:         def[time.Duration](b + "cooldown"),
		MaxCooldown:      def[time.Duration](b + "max_cooldown"),
		Successes:        def[int](b + "successes"),
		CountEarlyReset:  def[bool](b + "count_early_reset"),
		EarlyResetWindow: def[time.Duration](b + "early_reset_window"),
		CountNoReply:     def[bool](b + "count_no_reply"),
	}
}

// DefaultConnectBudget is connect_budget when the file does not set it; a
// pool whose connect_timeout is longer gets its connect_timeout instead, so
// raising the one never makes the other an error.
const DefaultConnectBudget = 5 * time.Second

// DefaultPool returns a pool named name with every key at its default and
// no backends.
func DefaultPool(name string) *Pool {
	const p = poolPath + "."
	return &Pool{
		Name:              name,
		Algorithm:         def[string](p + "algorithm"),
		HashKey:           def[string](p + "hash_key"),
		ConnectTimeout:    def[time.Duration](p + "connect_timeout"),
		ConnectBudget:     def[time.Duration](p + "connect_budget"),
		IdleTimeout:       def[time.Duration](p + "idle_timeout"),
		Retries:           def[int](p + "retries"),
		SlowStart:         def[time.Duration](p + "slow_start"),
		HashBalanceFactor: def[float64](p + "hash_balance_factor"),
		RingVnodes:        def[int](p + "ring_vnodes"),
		MaglevTableSize:   def[int](p + "maglev_table_size"),
		Protocol:          ProtocolTCP, // that of the listeners naming it, when one does
		ReplyTimeout:      def[time.Duration](p + "reply_timeout"),
		Health:            DefaultHealth(),
		Breaker:           DefaultBreaker(),
		ProxyProtocol:     def[string](p + "proxy_protocol"),
		QueueTimeout:      def[time.Duration](p + "queue_timeout"),
		Keepalive:         def[time.Duration](p + "keepalive"),
		KeepaliveInterval: def[time.Duration](p + "keepalive_interval"),
		KeepaliveCount:    def[int](p + "keepalive_count"),
	}
}
