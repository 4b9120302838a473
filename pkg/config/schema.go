package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/l4lb/l4lb/pkg/sniroute"
	"github.com/l4lb/l4lb/pkg/syslog"
)

// The schema is the one statement of every key of the file: its table,
// name, type, default, bounds and meaning. Parse reads a key's bounds and
// allowed values from it, the Default* functions its default, and
// docs/configuration.md is generated from it (reference.go), so none of
// these can disagree with another. The bounds themselves are the named
// constants of bounds.go and policy.go, which say why each is where it is.

// Kind is the TOML type of a key's value, as the reference names it.
type Kind string

// The kinds of value a key takes. A duration is a string with a unit,
// "500ms" or "1m30s".
const (
	KindString      Kind = "string"
	KindStrings     Kind = "array of strings"
	KindInteger     Kind = "integer"
	KindFloat       Kind = "float"
	KindBool        Kind = "boolean"
	KindDuration    Kind = "duration"
	KindDurationOff Kind = `"off" or duration` // a keepalive: 0 is written "off"
)

// Key is one key of a table.
type Key struct {
	Name string
	Kind Kind
	// Default is the value when the file leaves the key out, of the Go
	// type of Kind (string, []string, int, float64, bool, time.Duration);
	// nil when there is none: the key is required, or its default is
	// worked out at start (Meaning says how).
	Default any
	// Min and Max bound an integer (int), float (float64) or duration
	// (time.Duration) key, inclusive; nil: no bound of the key's own
	// (a duration is still at most MaxDuration, an integer at least 0).
	Min, Max any
	// Zero, when set, is what 0 means for a key whose Min is above 0: 0
	// is then accepted too. Error messages quote it.
	Zero string
	// Values are the accepted values of a string key; nil: any that
	// passes the key's own check.
	Values []string
	// Only is ProtocolTCP or ProtocolUDP for a key that applies to
	// listeners or pools of that protocol alone (set on the other, it is
	// an error); "": both.
	Only string
	// Rule is a condition against other keys, in words ("at most
	// interval"); Parse checks it in code, the reference quotes it.
	Rule string
	// Meaning is one line: what the key does.
	Meaning string
}

// Section is one table of the file, with its keys in reference order.
type Section struct {
	// Path names the table as the reference does: "global", "listener",
	// "pool.NAME.health" (NAME standing for every pool's name).
	Path string
	// Array: the table is an array of tables, written [[Path]].
	Array   bool
	Meaning string
	Keys    []Key
}

// Header is the table's header as the file writes it: [global],
// [[listener]].
func (s Section) Header() string {
	if s.Array {
		return "[[" + s.Path + "]]"
	}
	return "[" + s.Path + "]"
}

// Schema returns every table of the file, in reference order. The result
// is the caller's to keep; the schema itself cannot be changed through it.
func Schema() []Section {
	out := slices.Clone(schema)
	for i := range out {
		out[i].Keys = slices.Clone(out[i].Keys)
	}
	return out
}

// spec returns the key name of the table at path. A key the decoder
// reads must be in the schema: a miss is a bug in this package, found by
// any test that parses a file with the table (TestSchemaIsWhatParseReads).
func spec(path, name string) *Key {
	k, ok := schemaIndex[path+"."+name]
	if !ok {
		panic(fmt.Sprintf("config: key %s.%s is read but not in the schema", path, name))
	}
	return k
}

// def returns the default of the key at path ("pool.NAME.health.rise").
func def[T any](path string) T {
	k, ok := schemaIndex[path]
	if !ok {
		panic("config: no key " + path + " in the schema")
	}
	v, ok := k.Default.(T)
	if !ok {
		var want T
		panic(fmt.Sprintf("config: the default of %s is %T, not %T", path, k.Default, want))
	}
	return v
}

// schemaIndex is every key by its table's path and its name.
var schemaIndex = func() map[string]*Key {
	m := map[string]*Key{}
	for i := range schema {
		for j := range schema[i].Keys {
			m[schema[i].Path+"."+schema[i].Keys[j].Name] = &schema[i].Keys[j]
		}
	}
	return m
}()

// nameRule is what a listener or pool name may be (checkName).
var nameRule = "1-" + strconv.Itoa(maxNameLen) + " of [A-Za-z0-9._-]"

// Paths of the pool tables, whose middle part is each pool's name.
const (
	poolPath    = "pool.NAME"
	backendPath = "pool.NAME.backend"
	healthPath  = "pool.NAME.health"
	breakerPath = "pool.NAME.breaker"
	// routePath is a listener's TLS routes (routes.go).
	routePath = "listener.route"
	// discoveryPath is the pool's DNS discovery (discovery.go).
	discoveryPath = "pool.NAME.discovery"
)

var schema = []Section{
	{Path: "global", Meaning: "Process-wide settings.", Keys: []Key{
		{Name: "shutdown_timeout", Kind: KindDuration, Default: 30 * time.Second, Min: time.Duration(0),
			Meaning: `How long open relays get to finish after SIGTERM; "0s" cuts them at once.`},
		{Name: "upgrade_drain_timeout", Kind: KindDuration, Default: time.Duration(0), Min: time.Duration(0), Zero: "until they close",
			Meaning: "After a binary upgrade, how long the old process keeps the connections the new one did not adopt (an older build, another hand-over version), then resets them; it also bounds how long a process upgraded in turn waits for the one before it (docs/operations.md)."},
		{Name: "max_connections", Kind: KindInteger, Default: 0, Min: 0, Max: MaxClientConnections,
			Meaning: "Client connections at once (two fds each); 0: derived from RLIMIT_NOFILE."},
		{Name: "event_loops", Kind: KindInteger, Default: 0, Min: 0, Max: MaxEventLoops,
			Meaning: "Event loops, each with its own SO_REUSEPORT socket per listener; 0: one per CPU."},
		{Name: "accept_loops", Kind: KindInteger, Min: 0, Max: MaxEventLoops, Rule: "not beside event_loops",
			Meaning: "The older name of event_loops, read when event_loops is absent."},
		{Name: "pipe_size", Kind: KindInteger, Default: 1 << 20, Min: MinPipeSize, Max: MaxPipeSize,
			Meaning: "Bytes of each splice pipe (F_SETPIPE_SZ); unprivileged, the kernel caps it at fs.pipe-max-size."},
		{Name: "busy_poll", Kind: KindDuration, Default: time.Duration(0), Min: time.Microsecond, Max: MaxBusyPoll, Zero: "off",
			Meaning: "How long a busy event loop keeps polling before it sleeps in epoll_wait."},
		{Name: "wake_coalesce", Kind: KindDuration, Default: DefaultWakeCoalesce, Min: time.Microsecond, Max: MaxWakeCoalesce, Zero: "off",
			Meaning: "How long a loop that just relayed on several connections sleeps on a timer, letting events gather."},
		{Name: "state_file", Kind: KindString, Default: "",
			Meaning: `Where drains, weights and manual disables are kept across restarts; "": memory only. Its directory must exist and be writable.`},
	}},
	{Path: "admin", Meaning: "The metrics and admin API endpoint: /metrics, /api/v1, /debug/pprof, and the status page on /.", Keys: []Key{
		{Name: "listen", Kind: KindString, Default: "127.0.0.1:9090",
			Meaning: `IP:port of the endpoint; "" turns it off. Off loopback, l4lb warns at start.`},
		{Name: "token_file", Kind: KindString, Default: "",
			Meaning: `A file holding a bearer token that every request but GET and HEAD then needs; "": no token.`},
		{Name: "max_connections", Kind: KindInteger, Default: 64, Min: 1, Max: MaxAdminConns,
			Meaning: "Admin connections open at once; past it they are reset, so scrapes never take the data path's fds."},
	}},
	{Path: "log", Meaning: "The process log and the access log.", Keys: []Key{
		{Name: "level", Kind: KindString, Default: "info", Values: LogLevels(), Meaning: "The least severe level logged."},
		{Name: "format", Kind: KindString, Default: "text", Values: LogFormats(), Meaning: "How log lines are written."},
		{Name: "access", Kind: KindString, Default: AccessOff, Values: AccessFormats(),
			Meaning: "The access log: one line per ended TCP client connection, refused ones included, and per ended UDP session; syslog: one JSON message each to [log] syslog."},
		{Name: "access_file", Kind: KindString, Default: "", Rule: `not with access = "syslog"`,
			Meaning: `The file access lines are appended to (0640, reopened after rotation); "": standard error.`},
		{Name: "access_interval", Kind: KindDuration, Default: time.Duration(0), Min: MinAccessInterval, Zero: "off",
			Meaning: "Every connection and UDP session still open gets an interim line (event interim, bytes so far) this often, spread over the interval."},
		{Name: "access_on_connect", Kind: KindBool, Default: false,
			Meaning: "A line (event connect) when a TCP client's backend connection is established, besides the one when it ends."},
		{Name: "process", Kind: KindString, Default: ProcessStderr, Values: ProcessOutputs(),
			Meaning: "Where the process log goes: standard error, or one message a record to [log] syslog (severity from its level)."},
		{Name: "syslog", Kind: KindString, Default: syslog.DefaultAddress,
			Meaning: "The syslog socket for access or process = \"syslog\": a unixgram path (/dev/log), unixgram:/path or udp:IP:PORT; full or absent, messages are dropped and counted."},
		{Name: "syslog_format", Kind: KindString, Default: syslog.FormatRFC5424, Values: syslog.Formats(), Rule: `local: a unixgram socket only`,
			Meaning: "The syslog header: rfc5424, or local (syslog(3)'s, which journald and rsyslog's /dev/log parse)."},
		{Name: "syslog_facility", Kind: KindString, Default: syslog.DefaultFacility.String(), Values: syslog.FacilityNames(),
			Meaning: "The syslog facility of both logs' messages."},
	}},
	{Path: "cluster", Meaning: "Where breaker state and manual disables are kept, and how a fleet of l4lb shares them; read at start (docs/fleet.md).", Keys: []Key{
		{Name: "store", Kind: KindString, Default: StoreMemory, Values: Stores(),
			Meaning: "memory: this process alone; redis: shared by every l4lb using the same server."},
		{Name: "redis_url", Kind: KindString, Rule: `required with store = "redis"`,
			Meaning: "The server: redis:// | rediss:// (TLS) | unix:///path | valkey(s)://, user:pass@ allowed, only ?db= as a query."},
		{Name: "password_file", Kind: KindString, Default: "", Rule: `store = "redis" only`,
			Meaning: "A file whose content (one trailing newline trimmed) is the password; wins over the URL's."},
		{Name: "tls_ca_file", Kind: KindString, Default: "", Rule: `store = "redis" only`,
			Meaning: "A PEM CA bundle to verify the server; any tls_* key turns TLS on."},
		{Name: "tls_cert_file", Kind: KindString, Default: "", Rule: `store = "redis" only; with tls_key_file`,
			Meaning: "The client certificate."},
		{Name: "tls_key_file", Kind: KindString, Default: "", Rule: `store = "redis" only; with tls_cert_file`,
			Meaning: "The client certificate's private key."},
		{Name: "tls_server_name", Kind: KindString, Default: "", Rule: `store = "redis" only`,
			Meaning: "The name to verify instead of the URL's host."},
		{Name: "sentinel_master", Kind: KindString, Default: "", Rule: `store = "redis" only`,
			Meaning: "A master set: redis_url's host and sentinel_addrs are then Sentinels monitoring it."},
		{Name: "sentinel_addrs", Kind: KindStrings, Default: []string{}, Rule: `store = "redis" only; with sentinel_master`,
			Meaning: `More Sentinels, each "host:port".`},
		{Name: "redis_addrs", Kind: KindStrings, Default: []string{}, Rule: `store = "redis" only; not with sentinel_master`,
			Meaning: `More Redis Cluster nodes, each "host:port", asked with redis_url's for the cluster's layout (docs/fleet-redis.md).`},
		{Name: "key_prefix", Kind: KindString, Default: "l4lb:", Rule: `store = "redis" only; at most ` + strconv.Itoa(MaxKeyPrefixLen) + ` printable bytes, no { or }`,
			Meaning: "What every key the fleet writes starts with; the same on every instance sharing the store."},
		{Name: "sync_interval", Kind: KindDuration, Default: 2 * time.Second, Min: MinSyncInterval, Max: MaxSyncInterval, Rule: `store = "redis" only`,
			Meaning: "How often each instance checks the store: its health, and whether it lost the fleet's data. Reads are cached until the store says a key changed (docs/fleet.md), not for this long."},
		{Name: "timeout", Kind: KindDuration, Default: 250 * time.Millisecond, Min: MinStoreTimeout, Rule: `store = "redis" only; below sync_interval`,
			Meaning: "The bound of one store operation; past it the instance decides locally."},
		{Name: "instance", Kind: KindString, Default: "", Rule: "printable ASCII, no spaces, at most " + strconv.Itoa(MaxInstanceLen) + " bytes",
			Meaning: `This instance's name to the store and in logs; "": host name and pid.`},
		{Name: "trip_quorum", Kind: KindInteger, Default: 1, Min: 1, Max: MaxTripQuorum, Rule: `store = "redis" only`,
			Meaning: "How many instances must trip a backend within its breaker window to take it out for the fleet; below it, only their own dials stop (docs/fleet.md, a quorum for fleet-wide trips)."},
	}},
	{Path: "listener", Array: true, Meaning: "One address l4lb serves; at least one.", Keys: slices.Concat([]Key{
		{Name: "name", Kind: KindString, Rule: "required; unique; " + nameRule,
			Meaning: "The listener's name in metrics, logs and the admin API."},
		{Name: "bind", Kind: KindString, Rule: "required; no two of one protocol collide",
			Meaning: `IP:port to listen on; "0.0.0.0:P" is every IPv4 address, "[::]:P" every IPv6 one.`},
		{Name: "protocol", Kind: KindString, Default: ProtocolTCP, Values: Protocols(),
			Meaning: "What the listener relays: TCP connections or UDP sessions."},
		{Name: "pool", Kind: KindString, Rule: "required; a [pool.NAME] no listener of the other protocol names",
			Meaning: "The pool the listener sends clients to."},
		{Name: "backlog", Kind: KindInteger, Default: 0, Min: 0, Max: MaxBacklog, Only: ProtocolTCP,
			Meaning: "The listen backlog; 0: the kernel's somaxconn (which, and 65535, cap larger values)."},
		{Name: "session_timeout", Kind: KindDuration, Default: 60 * time.Second, Min: MinIdleTimeout, Only: ProtocolUDP,
			Meaning: "A session with no datagram either way for this long ends."},
		{Name: "max_sessions", Kind: KindInteger, Default: DefaultMaxSessions, Min: 1, Max: MaxUDPSessions, Only: ProtocolUDP,
			Meaning: "Sessions at once, one socket (fd) each; at the cap the longest-idle one is evicted."},
		{Name: "responses", Kind: KindInteger, Default: 0, Min: 0, Only: ProtocolUDP,
			Meaning: "0: no limit; else a session ends after this many datagrams from its backend (1 for DNS)."},
		{Name: "reuse_sockets", Kind: KindBool, Default: false, Only: ProtocolUDP,
			Meaning: "A session that ended cleanly (one datagram, exactly its responses) leaves its backend socket to the next."},
		{Name: "requests", Kind: KindInteger, Default: 0, Min: 0, Only: ProtocolUDP,
			Meaning: "0: no limit; else a session takes this many client datagrams, and the next starts a new one."},
		{Name: "receive_buffer", Kind: KindInteger, Default: 0, Min: 0, Max: MaxReceiveBuffer, Only: ProtocolUDP,
			Meaning: "SO_RCVBUF in bytes of each listener socket (the kernel caps it at net.core.rmem_max); 0: left alone."},
		{Name: "allow", Kind: KindStrings, Default: []string{},
			Meaning: `Addresses or CIDR networks ("10.0.0.0/8"); when not empty, only these clients are served.`},
		{Name: "deny", Kind: KindStrings, Default: []string{},
			Meaning: "Addresses or CIDR networks never served; deny wins over allow."},
		{Name: "access_log", Kind: KindBool, Default: true,
			Meaning: "false: the listener writes no access lines (connect, interim or close) while [log] access is on; its metrics are unchanged. A reload applies it to open connections and sessions too."},
		{Name: "accept_proxy", Kind: KindBool, Default: false, Only: ProtocolTCP,
			Meaning: "The client side speaks the PROXY protocol (v1 or v2), and the address it carries is the client's."},
		{Name: "trusted_proxies", Kind: KindStrings, Only: ProtocolTCP, Rule: "required with accept_proxy = true, and only with it",
			Meaning: "The peers allowed to send a PROXY header, addresses or CIDR networks."},
		{Name: "proxy_timeout", Kind: KindDuration, Default: DefaultProxyTimeout, Min: MinProxyTimeout, Max: MaxProxyTimeout, Only: ProtocolTCP, Rule: "only with accept_proxy = true",
			Meaning: "How long the whole PROXY header may take to arrive."},
		{Name: "max_connections_per_source", Kind: KindInteger, Default: 0, Min: 0, Max: MaxConnectionsPerSource, Only: ProtocolTCP,
			Meaning: "0: off; else connections at once of one client source."},
		{Name: "rate_per_source", Kind: KindFloat, Default: 0.0, Min: 0.0, Max: float64(MaxRatePerSource), Only: ProtocolTCP,
			Meaning: "0: off; else new connections a second of one client source (a token bucket)."},
		{Name: "burst_per_source", Kind: KindInteger, Default: 0, Min: 0, Only: ProtocolTCP, Rule: "only with rate_per_source above 0",
			Meaning: "The token bucket's size; 0: max(1, ceil(rate_per_source))."},
		{Name: "source_ipv4_prefix", Kind: KindInteger, Default: DefaultSourceIPv4Prefix, Min: 1, Max: 32, Only: ProtocolTCP, Rule: "only with a per-source limit",
			Meaning: "Leading bits of an IPv4 client address that make one source for the per-source limits."},
		{Name: "source_ipv6_prefix", Kind: KindInteger, Default: DefaultSourceIPv6Prefix, Min: 1, Max: 128, Only: ProtocolTCP, Rule: "only with a per-source limit",
			Meaning: "The same for IPv6 (64: each /64, the block one host takes its addresses from)."},
	}, keepaliveKeys("client"), []Key{
		{Name: "inspect_timeout", Kind: KindDuration, Default: DefaultInspectTimeout, Min: MinInspectTimeout, Max: MaxInspectTimeout, Only: ProtocolTCP, Rule: "only with [[listener.route]]",
			Meaning: "How long the whole ClientHello may take to arrive; past it (a server-first protocol, a stalled client) the client goes to the listener's pool."},
		{Name: "on_unrecognized", Kind: KindString, Default: OnFallback, Values: Inspections(), Only: ProtocolTCP, Rule: "only with [[listener.route]]",
			Meaning: "A client whose first bytes are not a TLS ClientHello, or a malformed one: fallback sends it to the listener's pool, the bytes read first; reset resets it."},
		{Name: "on_too_large", Kind: KindString, Default: OnFallback, Values: Inspections(), Only: ProtocolTCP, Rule: "only with [[listener.route]]",
			Meaning: "A ClientHello longer than 16 KiB (one TLS record's worth, however many records carry it): fallback sends the client to the listener's pool, unrouted; reset resets it."},
	})},
	{Path: routePath, Array: true, Meaning: "One TLS route of a TCP listener (docs/steering.md, \"SNI routing\"): a client whose ClientHello names one of sni, and offers one of alpn when set, goes to pool, with its TLS untouched. Exact names beat wildcards; at one name, a route with alpn beats one without, and among those the client's most preferred protocol wins; `check` refuses one name in two routes that nothing orders.", Keys: []Key{
		{Name: "sni", Kind: KindStrings, Rule: `required; not empty; host names of at most ` + strconv.Itoa(sniroute.MaxNameLen) + ` characters (RFC 6066, no IP literals), exact or "*." and one; unique per alpn protocol`,
			Meaning: `Server names, any case, a trailing dot ignored: "api.example.com", or "*.example.com" for one whole leftmost label (not example.com, not a.b.example.com).`},
		{Name: "alpn", Kind: KindStrings, Default: []string{}, Rule: "each of 1-" + strconv.Itoa(sniroute.MaxProtocolLen) + " bytes, once in the route",
			Meaning: `Protocols ("h2", "http/1.1") of which the client must offer one, compared exactly; []: any, or none offered.`},
		{Name: "pool", Kind: KindString, Rule: "required; a [pool.NAME] no UDP listener names",
			Meaning: "The pool the route sends its clients to."},
		{Name: "name", Kind: KindString, Default: "", Rule: nameRule + `, or ""`,
			Meaning: `The route's name in metrics (the route label) and the access log; routes of one listener with one name are counted together; "": its pool's name.`},
	}},
	{Path: "pool", Meaning: "The pools, each a table [pool.NAME]; NAME is " + nameRule + ". A pool serves the protocol of the listeners naming it (TCP when none does)."},
	{Path: poolPath, Meaning: "One pool of backends and how clients are spread over them.", Keys: slices.Concat([]Key{
		{Name: "algorithm", Kind: KindString, Default: AlgorithmRoundRobin, Values: Algorithms(),
			Meaning: "How a backend is picked; round-robin and random ignore weight, the others honour it."},
		{Name: "hash_key", Kind: KindString, Default: HashKeySourceIP, Values: HashKeys(),
			Meaning: "What ip-hash, consistent-hash and maglev hash; sni: the TLS server name a listener's routes read (TCP pools reached only through listeners with routes; a client without a name hashes by source-ip)."},
		{Name: "connect_timeout", Kind: KindDuration, Default: 2 * time.Second, Min: MinConnectTimeout, Only: ProtocolTCP,
			Meaning: "One connect attempt."},
		{Name: "connect_budget", Kind: KindDuration, Default: DefaultConnectBudget, Min: MinConnectTimeout, Only: ProtocolTCP, Rule: "at least connect_timeout",
			Meaning: "All attempts of one client together, and how long a client of an all-down pool is held for a backend to come back; left out, the default or connect_timeout, whichever is longer."},
		{Name: "idle_timeout", Kind: KindDuration, Default: 10 * time.Minute, Min: MinIdleTimeout, Only: ProtocolTCP,
			Meaning: "No byte either way for this long closes the relay."},
		{Name: "reply_timeout", Kind: KindDuration, Default: 2 * time.Second, Min: MinConnectTimeout, Only: ProtocolUDP,
			Meaning: "How long a session's first datagram waits for the backend's reply: its verdict as a dial."},
		{Name: "retries", Kind: KindInteger, Default: 2, Min: 0, Max: MaxRetries,
			Meaning: "Further distinct backends tried after a failed dial."},
		{Name: "slow_start", Kind: KindDuration, Default: time.Duration(0), Min: time.Duration(0),
			Meaning: `A backend that becomes usable ramps up its share over this long; "0s": off.`},
		{Name: "hash_balance_factor", Kind: KindFloat, Default: 0.0, Rule: "0 or above 1",
			Meaning: "consistent-hash bounded load: no backend takes more than factor x the average; 0: off."},
		{Name: "ring_vnodes", Kind: KindInteger, Default: 160, Min: 1, Max: MaxRingVnodes, Rule: "times the total weight at most " + strconv.Itoa(MaxRingPoints),
			Meaning: "consistent-hash ring points per unit of weight; a backend's share strays from its weight's by about 1/sqrt(ring_vnodes)."},
		{Name: "maglev_table_size", Kind: KindInteger, Default: 65537, Min: 1, Max: MaxMaglevTableSize, Rule: "a prime, at least the number of backends",
			Meaning: "Entries of the Maglev lookup table; 100 times the backends or more keeps their shares within 1% and a change's moved keys near the ideal (check warns below it). Choose it once for the pool's largest size: a new size remaps every key."},
		{Name: "proxy_protocol", Kind: KindString, Default: ProxyProtocolOff, Values: ProxyProtocols(), Rule: "UDP pools: off or v2",
			Meaning: "A PROXY header sent to the backend before any client byte (UDP: before every datagram)."},
		{Name: "queue_timeout", Kind: KindDuration, Default: time.Duration(0), Min: time.Duration(0), Max: MaxQueueTimeout, Only: ProtocolTCP,
			Meaning: `When every candidate backend is at its max_connections, how long a client waits for a slot; "0s": refused at once.`},
		{Name: "source", Kind: KindStrings, Default: []string{}, Only: ProtocolTCP,
			Meaning: `Local addresses to dial from, in turn: "ADDR", "ADDR:LO-HI" or "[V6]"; []: the kernel's choice.`},
	}, keepaliveKeys("backend"))},
	{Path: backendPath, Array: true, Meaning: "One backend of the pool; at least one per pool without [pool.NAME.discovery].", Keys: []Key{
		{Name: "addr", Kind: KindString, Rule: "required; unique in the pool",
			Meaning: "The backend's IP:port; its name in metrics and the admin API."},
		{Name: "weight", Kind: KindInteger, Default: 1, Min: 0, Max: MaxWeight, Rule: "not 0 on every backend",
			Meaning: "Its share of new connections; 0 takes none (a drain), under every algorithm."},
		{Name: "id", Kind: KindString, Default: "", Rule: "unique, and no other backend's addr",
			Meaning: `The identity hashing places it by, so it can move address without reshuffling; "": addr.`},
		{Name: "max_connections", Kind: KindInteger, Default: 0, Min: 0, Max: MaxBackendConnections,
			Meaning: "Dials in flight and relays (UDP: sessions) at once; 0: no cap."},
		{Name: "backup", Kind: KindBool, Default: false, Rule: "not on every backend of the pool",
			Meaning: "A backup takes new clients only while no primary (a backend without backup) of the pool is usable; its checks and breaker run all the time."},
	}},
	{Path: discoveryPath, Meaning: "Backends found in DNS, beside or instead of [[pool.NAME.backend]] (docs/discovery.md). Lookups run off the event loops; a failed one keeps the last good set.", Keys: []Key{
		{Name: "dns", Kind: KindString, Rule: `"NAME:PORT"; this or srv, not both`,
			Meaning: "A name whose A and AAAA records are the backends, each at PORT."},
		{Name: "srv", Kind: KindString, Rule: `"_service._proto.NAME"; this or dns, not both`,
			Meaning: "A name whose SRV records are the backends: targets (resolved to addresses), ports and weights; the lowest priority that resolves serves."},
		{Name: "resolvers", Kind: KindStrings, Default: []string{}, Rule: `"IP" or "IP:PORT" (port 53 when left out)`,
			Meaning: "The DNS servers asked, in turn; []: the nameservers of /etc/resolv.conf."},
		{Name: "timeout", Kind: KindDuration, Default: 2 * time.Second, Min: MinDiscoveryTimeout, Max: MaxDiscoveryRefresh,
			Meaning: "How long one query to one resolver may take before the next is asked."},
		{Name: "min_refresh", Kind: KindDuration, Default: 1 * time.Second, Min: MinDiscoveryRefresh, Max: MaxDiscoveryRefresh,
			Meaning: "The records are looked up again at their TTL, but never sooner than this (and after a failed lookup, this long)."},
		{Name: "max_refresh", Kind: KindDuration, Default: 5 * time.Minute, Min: MinDiscoveryRefresh, Max: MaxDiscoveryRefresh, Rule: "at least min_refresh",
			Meaning: "...and never later than this."},
		{Name: "empty_grace", Kind: KindDuration, Default: 60 * time.Second, Min: time.Duration(0), Max: MaxDiscoveryRefresh,
			Meaning: `A name that stops existing (NXDOMAIN) or has no records keeps its last backends this long; "0s": they leave at once.`},
		{Name: "family", Kind: KindString, Default: FamilyAny, Values: Families(),
			Meaning: "Which addresses are backends: any (A and AAAA), ipv4 (A), ipv6 (AAAA)."},
		{Name: "weight", Kind: KindInteger, Default: 1, Min: 1, Max: MaxWeight, Rule: "only with dns (SRV records carry their own)",
			Meaning: "The weight of each backend found by dns."},
		{Name: "max_connections", Kind: KindInteger, Default: 0, Min: 0, Max: MaxBackendConnections,
			Meaning: "Each discovered backend's cap, as a backend's max_connections; 0: no cap."},
		{Name: "backup", Kind: KindBool, Default: false, Rule: "only beside primary [[backend]]s",
			Meaning: "Every discovered backend is a backup (as a backend's backup = true)."},
	}},
	{Path: healthPath, Meaning: "The pool's active health checks.", Keys: []Key{
		{Name: "enabled", Kind: KindBool, Default: true, Meaning: "false: no check is made, and every backend counts as healthy."},
		{Name: "type", Kind: KindString, Default: HealthConnect, Values: HealthTypes(), Rule: "icmp for UDP pools, their default",
			Meaning: "connect: a TCP connect; send-expect: send send, pass on a reply that starts with expect; icmp: an empty datagram, failed by ICMP unreachable; tls: a TCP connect and a TLS handshake (TCP pools)."},
		{Name: "port", Kind: KindInteger, Default: 0, Min: 0, Max: 65535, Rule: `only with type = "connect" or "tls"`,
			Meaning: "The TCP port to connect to; 0: the backend's own (a UDP pool's connect check needs one its backends serve)."},
		{Name: "server_name", Kind: KindString, Rule: `required with type = "tls", only with it; a DNS name or an IP`,
			Meaning: "The name a tls check sends (SNI) and, with ca_file, the name the backend's certificate must be valid for."},
		{Name: "ca_file", Kind: KindString, Default: "", Rule: `only with type = "tls"; PEM certificates, readable`,
			Meaning: `The CAs a tls check verifies the backend's certificate against (read again when the file changes); "": no verification, any certificate passes.`},
		{Name: "send", Kind: KindString, Default: "", Rule: `only with type = "send-expect"; not beside send_hex`,
			Meaning: "The bytes a send-expect check sends; a UDP pool's check must send some."},
		{Name: "send_hex", Kind: KindString, Default: "", Rule: `only with type = "send-expect"; not beside send`,
			Meaning: `send written as hex digits, two a byte ("70696e67" for "ping").`},
		{Name: "expect", Kind: KindString, Default: "", Rule: `only with type = "send-expect"; not beside expect_hex`,
			Meaning: `What the reply must start with; "": any reply (over TCP, one byte at least).`},
		{Name: "expect_hex", Kind: KindString, Default: "", Rule: `only with type = "send-expect"; not beside expect`,
			Meaning: "expect written as hex digits."},
		{Name: "interval", Kind: KindDuration, Default: 2 * time.Second, Min: MinCheckInterval, Max: MaxCheckInterval,
			Meaning: "Time between the checks of one backend."},
		{Name: "timeout", Kind: KindDuration, Default: 1 * time.Second, Min: MinCheckTimeout, Rule: "at most interval",
			Meaning: "How long one check may take."},
		{Name: "rise", Kind: KindInteger, Default: 2, Min: 1, Max: MaxRiseFall,
			Meaning: "Consecutive passing checks that bring a down backend up."},
		{Name: "fall", Kind: KindInteger, Default: 3, Min: 1, Max: MaxRiseFall,
			Meaning: "Consecutive failing checks that take an up backend down."},
	}},
	{Path: breakerPath, Meaning: "The pool's connect-failure circuit breaker, one per backend (docs/breaker.md).", Keys: []Key{
		{Name: "failures", Kind: KindInteger, Default: 3, Min: 1, Max: MaxBreakerCount,
			Meaning: "Failed dials within window that trip the breaker."},
		{Name: "window", Kind: KindDuration, Default: 120 * time.Second, Min: MinBreakerWindow,
			Meaning: "The sliding window failures are counted in."},
		{Name: "min_ratio", Kind: KindFloat, Default: 0.0, Min: 0.0, Max: 1.0,
			Meaning: "0: off; else a trip also needs this share of failed dials among at least min_volume."},
		{Name: "min_volume", Kind: KindInteger, Default: 0, Min: 0, Max: MaxBreakerCount,
			Meaning: "The dials in the window min_ratio needs before it judges."},
		{Name: "cooldown", Kind: KindDuration, Default: 30 * time.Second, Min: MinCooldown,
			Meaning: "How long a tripped breaker waits before its first probe."},
		{Name: "max_cooldown", Kind: KindDuration, Default: 5 * time.Minute, Min: MinCooldown, Rule: "at least cooldown",
			Meaning: "The cap of the cooldown, which doubles after each failed probe."},
		{Name: "successes", Kind: KindInteger, Default: 1, Min: 1, Max: MaxBreakerCount,
			Meaning: "Post-trip probe or force-try successes that close the breaker."},
		{Name: "count_early_reset", Kind: KindBool, Default: false, Only: ProtocolTCP,
			Meaning: "A reset before the backend's first byte fails the client's dial."},
		{Name: "early_reset_window", Kind: KindDuration, Default: 5 * time.Second, Min: MinEarlyResetWindow, Only: ProtocolTCP,
			Meaning: "With count_early_reset: a backend silent this long after the connect has accepted the dial."},
		{Name: "count_no_reply", Kind: KindBool, Default: false, Only: ProtocolUDP,
			Meaning: "A session's first datagram left without a reply for reply_timeout is a failed dial (off: many UDP protocols are one-way)."},
	}},
}

// keepaliveKeys are the TCP keepalive keys of one side of a relay, the
// client's ([[listener]]) or the backend's ([pool.NAME]).
func keepaliveKeys(side string) []Key {
	return []Key{
		{Name: "keepalive", Kind: KindDurationOff, Default: time.Duration(0), Min: MinKeepalive, Max: MaxKeepalive, Only: ProtocolTCP, Rule: "whole seconds",
			Meaning: "The " + side + " side's TCP keepalive: the idle time before the first probe (TCP_KEEPIDLE)."},
		{Name: "keepalive_interval", Kind: KindDuration, Default: time.Duration(0), Min: MinKeepaliveInterval, Max: MaxKeepaliveInterval, Zero: "the kernel's default", Only: ProtocolTCP, Rule: "whole seconds; only with keepalive on",
			Meaning: "The time between the " + side + " side's keepalive probes (TCP_KEEPINTVL)."},
		{Name: "keepalive_count", Kind: KindInteger, Default: 0, Min: 0, Max: MaxKeepaliveCount, Only: ProtocolTCP, Rule: "only with keepalive on",
			Meaning: "Unanswered probes that end the " + side + " connection (TCP_KEEPCNT); 0: the kernel's default."},
	}
}

// intRange is an integer key's bounds: at least 0 and at most
// math.MaxInt when the schema sets none.
func (k *Key) intRange() (lo, hi int) {
	lo, hi = 0, math.MaxInt
	if k.Min != nil {
		lo = k.Min.(int)
	}
	if k.Max != nil {
		hi = k.Max.(int)
	}
	return lo, hi
}

// durationRange is a duration key's bounds: 0 and MaxDuration when the
// schema sets none.
func (k *Key) durationRange() (lo, hi time.Duration) {
	lo, hi = 0, MaxDuration
	if k.Min != nil {
		lo = k.Min.(time.Duration)
	}
	if k.Max != nil {
		hi = k.Max.(time.Duration)
	}
	return lo, hi
}

// floatRange is a float key's bounds; a float key read with a range has
// both.
func (k *Key) floatRange() (lo, hi float64) { return k.Min.(float64), k.Max.(float64) }
