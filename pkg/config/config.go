package config

import (
	"net/netip"
	"time"
)

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
	// UpgradeDrainTimeout is how long an upgrade's old process keeps the
	// connections the new process did not adopt; 0 until they close.
	UpgradeDrainTimeout time.Duration
	// MaxConnections caps concurrent client connections; 0 asks the caller
	// to derive the cap from RLIMIT_NOFILE.
	MaxConnections int
	// EventLoops is the number of event loops, each with its own
	// SO_REUSEPORT socket per listener; 0 asks the caller for one per CPU.
	// The older key accept_loops sets it too, when event_loops is absent.
	EventLoops int
	// PipeSize is the size in bytes of each splice pipe (F_SETPIPE_SZ).
	PipeSize int
	// BusyPoll is how long a busy event loop keeps polling for events
	// before it sleeps in epoll_wait; 0 sleeps at once.
	BusyPoll time.Duration
	// WakeCoalesce is how long an event loop that just relayed data on
	// several connections at once sleeps on a timer, letting events
	// gather, instead of being woken by the next one; 0: never.
	WakeCoalesce time.Duration
	// StateFile is where runtime changes (manual disables, drains,
	// weights) are kept across restarts; "" keeps them in memory only.
	// CheckHost requires its directory to exist and be writable; the file
	// itself may be missing.
	StateFile string
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
	// one line per ended TCP client connection, refused ones included, and
	// per ended UDP session.
	Access string
	// AccessFile is the file access lines are appended to; "": standard
	// error.
	AccessFile string
	// Process is where the process log goes: stderr | syslog.
	Process string
	// Syslog is the syslog address as written (syslog.ParseAddress reads
	// it), for Access or Process "syslog"; SyslogFormat its header format
	// (rfc5424 | local), SyslogFacility its facility's name.
	Syslog, SyslogFormat, SyslogFacility string
	// AccessInterval > 0 writes an interim line for every connection and
	// UDP session still open this often; AccessOnConnect a line when a TCP
	// client's backend connection is established.
	AccessInterval  time.Duration
	AccessOnConnect bool
}

// UsesSyslog reports whether either log goes to syslog.
func (l Log) UsesSyslog() bool { return l.Access == AccessSyslog || l.Process == ProcessSyslog }

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
	// ReceiveBuffer is each listener socket's SO_RCVBUF in bytes (the
	// kernel caps it at net.core.rmem_max); 0: the socket's as it is
	// (the kernel's net.core.rmem_default for a socket l4lb binds).
	ReceiveBuffer int

	// AccessLog: the listener's connections and sessions write access
	// lines while [log] access is on (false keeps them out; both protocols).
	AccessLog bool

	// Traffic policy (issue 14); see policy.go. Allow and Deny apply to
	// both protocols, the rest to TCP listeners only.

	// AcceptProxy: the client side speaks the PROXY protocol (v1 or v2,
	// detected), and the address it carries is the client's.
	AcceptProxy bool
	// TrustedProxies are the peers allowed to send a PROXY header;
	// non-empty exactly when AcceptProxy.
	TrustedProxies []netip.Prefix
	// ProxyTimeout bounds the wait for the PROXY header (AcceptProxy).
	ProxyTimeout time.Duration
	// Allow, when non-empty, is the only client addresses served; Deny
	// are never served, and win over Allow. Canonical prefixes, IPv4 ones
	// as IPv4 (never IPv4-mapped IPv6); nil when empty.
	Allow []netip.Prefix
	Deny  []netip.Prefix
	// MaxConnsPerSource caps the connections of one client IP at once;
	// 0: no cap.
	MaxConnsPerSource int
	// RatePerSource is the new connections a second of one client IP (a
	// token bucket of BurstPerSource tokens); 0: no limit.
	RatePerSource float64
	// BurstPerSource is the bucket's size; 0 leaves it to pkg/srclimit,
	// which makes it max(1, ceil(rate)).
	BurstPerSource int
	// SourceIPv4Prefix and SourceIPv6Prefix are how many leading bits of
	// a client address name the source the two limits above count: 32
	// and 64 by default (each IPv4 address, each IPv6 /64).
	SourceIPv4Prefix, SourceIPv6Prefix int
	// Keepalive is the client side's TCP keepalive: the idle time before
	// the first probe (TCP_KEEPIDLE), whole seconds; 0: off.
	Keepalive time.Duration
	// KeepaliveInterval is the time between probes (TCP_KEEPINTVL), whole
	// seconds; 0: the kernel's default. Only with Keepalive.
	KeepaliveInterval time.Duration
	// KeepaliveCount is the unanswered probes that end the connection
	// (TCP_KEEPCNT); 0: the kernel's default. Only with Keepalive.
	KeepaliveCount int

	// TLS routing (issue 29), TCP listeners only; see routes.go.

	// Routes send a client to a pool chosen by its ClientHello's server
	// name and ALPN protocols, in file order (RouteMatcher's indices);
	// no route matched, or nothing to match by: Pool. nil: no client is
	// inspected.
	Routes []Route
	// InspectTimeout (with Routes) bounds the wait for the whole
	// ClientHello; past it the client goes to Pool, whatever it sent.
	InspectTimeout time.Duration
	// OnUnrecognized (with Routes) is OnFallback or OnReset: what becomes
	// of a client whose first bytes are not a TLS ClientHello, or a
	// malformed one.
	OnUnrecognized string
	// OnTooLarge (with Routes) is OnFallback or OnReset: what becomes of
	// a client whose ClientHello is longer than pkg/clienthello reads
	// (16 KiB).
	OnTooLarge string
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
	// Discovery finds more backends in DNS; nil: the file's only.
	Discovery *Discovery
	Line      int // line of the [pool.NAME] header (or its first key)

	// ProxyProtocol is the PROXY protocol header sent to backends before
	// any client byte: "off" | "v1" | "v2" (UDP pools: "off" | "v2").
	ProxyProtocol string
	// QueueTimeout (TCP pools): when every candidate backend is at its
	// MaxConnections, how long a client waits for a slot; 0: refused at
	// once.
	QueueTimeout time.Duration
	// Keepalive, KeepaliveInterval and KeepaliveCount (TCP pools) are the
	// backend side's TCP keepalive, as Listener's.
	Keepalive         time.Duration
	KeepaliveInterval time.Duration
	KeepaliveCount    int
	// Sources are the local addresses the pool dials from, in turn; a
	// source whose ports toward a backend are all in use gives way to the
	// next. Empty: the kernel's choice (TCP pools only).
	Sources []Source
}

// Backend is one [[pool.NAME.backend]] table.
type Backend struct {
	Addr   string // host:port as written; the host is an IP literal
	Weight int    // 0..256; 0 takes no new connections
	ID     string // identity for hashing; "" means Addr
	Line   int    // line of the [[pool.NAME.backend]] header
	// MaxConnections caps what this backend holds at once: dials in
	// flight and relays (sessions for UDP pools); 0: no cap.
	MaxConnections int
	// Source is where the backend came from: BackendFromFile,
	// BackendFromDNS or BackendFromAPI. No key of the file sets it: the
	// process does, as it merges discovery and the admin API into the
	// file's pools; "" means the file.
	Source string
	// Backup: the backend takes new clients only while no primary of its
	// pool (a backend without Backup) is usable (pkg/pool, backup.go).
	Backup bool
}

// Where a backend came from (Backend.Source), as GET /api/v1/pools says.
const (
	BackendFromFile = "file"
	BackendFromDNS  = "dns"
	BackendFromAPI  = "api"
)

// Identity is the name the backend is hashed by: its ID, or its Addr when
// no ID is set. Keeping an explicit ID lets an operator move a backend to a
// new address without reshuffling consistent-hash and Maglev placement.
func (b Backend) Identity() string {
	if b.ID != "" {
		return b.ID
	}
	return b.Addr
}

// Discovery is a [pool.NAME.discovery] table: where in DNS the pool's
// backends are found (one of DNS and SRV is set) and how often to look.
type Discovery struct {
	DNS        string   // "NAME:PORT": the name's A and AAAA records
	SRV        string   // "_service._proto.NAME": its SRV records
	Resolvers  []string // "IP:PORT", port filled in; empty: /etc/resolv.conf
	Timeout    time.Duration
	MinRefresh time.Duration
	MaxRefresh time.Duration
	EmptyGrace time.Duration
	Family     string // FamilyAny, FamilyIPv4 or FamilyIPv6
	// Weight and MaxConnections are each discovered backend's (SRV
	// records bring their own weights).
	Weight         int
	MaxConnections int
	Backup         bool // every discovered backend is a backup
	Line           int  // line of the table's header
}

// Health configures the active checks of a pool.
type Health struct {
	Enabled bool
	// Type is "connect" (a TCP connect; for UDP pools to Port),
	// "send-expect" (send Send, pass when the reply starts with Expect;
	// over the pool's protocol), "icmp" (UDP pools) or "tls" (TCP pools:
	// a TCP connect, to Port when set, and a TLS handshake).
	Type string
	// Port (connect and tls checks): the TCP port to connect to; 0: the
	// backend's own port.
	Port int
	// ServerName (tls checks, required there) is sent as SNI and, with
	// CAFile, is the name the certificate must be valid for.
	ServerName string
	// CAFile (tls checks): the PEM CA certificates the backend's
	// certificate must chain to; "": it is not verified.
	CAFile string
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
