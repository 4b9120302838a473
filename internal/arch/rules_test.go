package arch

// rules classifies every package of the module by what it may import from
// the module itself. A package missing here fails the test: a new package
// is placed on purpose. Leaves (nil) import nothing of the module.
var rules = map[string][]string{
	// Leaves: one job each, no module imports but the clock.
	"pkg/clock":       nil,
	"pkg/rawsys":      nil,
	"pkg/hashring":    nil,
	"pkg/breaker":     {"pkg/clock"},
	"pkg/health":      {"pkg/clock"},
	"pkg/dialer":      nil,
	"pkg/listener":    nil,
	"pkg/sdnotify":    nil,
	"pkg/sockopt":     nil,
	"pkg/proxyproto":  nil,
	"pkg/srclimit":    nil,
	"pkg/ipset":       nil,
	"pkg/loopguard":   nil,
	"pkg/syslog":      {"pkg/clock"},
	"pkg/memtrim":     nil,
	"pkg/siginbox":    nil,
	"pkg/flow":        nil,
	"pkg/clienthello": nil,
	"pkg/sniroute":    nil,

	// Built on leaves. The config checks routes by sniroute's rules and
	// syslog addresses by syslog's; the access log writes to syslog.
	"pkg/accesslog":         {"pkg/syslog"},
	"pkg/config":            {"pkg/sniroute", "pkg/syslog"},
	"pkg/splice":            {"pkg/flow", "pkg/rawsys"},
	"pkg/pick":              {"pkg/hashring"},
	"pkg/fleet":             {"pkg/breaker", "pkg/clock"},
	"pkg/breaker/storetest": {"pkg/breaker"},
	"pkg/membership":        {"pkg/config"},
	"pkg/pool":              {"pkg/breaker", "pkg/clock", "pkg/config", "pkg/dialer", "pkg/health", "pkg/pick", "pkg/proxyproto", "pkg/sockopt"},
	"pkg/discovery":         {"pkg/clock", "pkg/config"},

	// The data path: the reactor, and the TCP relay and UDP sessions on it.
	"pkg/reactor":    {"pkg/clock", "pkg/rawsys"},
	"pkg/relay":      {"pkg/accesslog", "pkg/clienthello", "pkg/config", "pkg/dialer", "pkg/flow", "pkg/ipset", "pkg/loopguard", "pkg/pool", "pkg/proxyproto", "pkg/rawsys", "pkg/reactor", "pkg/sockopt", "pkg/splice", "pkg/srclimit"},
	"pkg/udpsession": {"pkg/accesslog", "pkg/dialer", "pkg/flow", "pkg/ipset", "pkg/listener", "pkg/loopguard", "pkg/pool", "pkg/proxyproto", "pkg/rawsys", "pkg/reactor"},

	// Wiring and control: the server, the upgrade protocol, the admin API.
	"pkg/server":  {"pkg/accesslog", "pkg/config", "pkg/flow", "pkg/listener", "pkg/pool", "pkg/reactor", "pkg/relay", "pkg/sockopt", "pkg/splice", "pkg/udpsession"},
	"pkg/handoff": {"pkg/breaker", "pkg/clock", "pkg/config", "pkg/flow", "pkg/listener", "pkg/membership", "pkg/pool", "pkg/sdnotify", "pkg/server"},
	"pkg/admin":   {"pkg/config", "pkg/fleet", "pkg/pool", "pkg/relay", "pkg/server", "pkg/splice", "pkg/syslog", "pkg/udpsession"},

	// The command.
	"cmd/l4lb": {"internal/demo", "pkg/accesslog", "pkg/admin", "pkg/breaker", "pkg/config", "pkg/discovery", "pkg/fleet", "pkg/handoff", "pkg/health", "pkg/membership", "pkg/memtrim", "pkg/pool", "pkg/relay", "pkg/sdnotify", "pkg/server", "pkg/siginbox", "pkg/splice", "pkg/syslog"},
	// The demo's echo backends and introduction, for cmd/l4lb only.
	"internal/demo": {"pkg/config"},

	// What only tests, the bench and generators use.
	"e2e":                        nil,
	"internal/e2eutil":           {"internal/testnet"},
	"internal/testnet":           {"pkg/clock"},
	"internal/arch":              nil,
	"internal/promrules":         nil,
	"bench":                      {"bench/fleetsim", "internal/testnet"},
	"bench/fleetsim":             {"internal/testnet", "pkg/breaker", "pkg/config", "pkg/fleet"},
	"bench/healthscale":          {"pkg/health"},
	"pkg/config/internal/gendoc": {"pkg/config"},
}

// fenced third-party modules and the only packages that may import them
// directly: the TOML decoder behind the config parser, Prometheus behind
// the admin API and DNS discovery's metrics, the Redis client behind the
// fleet store, the DNS library behind discovery, the WebSocket library
// the end-to-end tests' clients and servers use, and cryptobyte behind the
// ClientHello parser.
var fenced = map[string][]string{
	"github.com/coder/websocket":          {"e2e"},
	"github.com/BurntSushi/toml":          {"pkg/config", "cmd/l4lb"},
	"github.com/prometheus/client_golang": {"pkg/admin", "pkg/discovery", "cmd/l4lb"},
	"github.com/prometheus/client_model":  {"pkg/admin", "cmd/l4lb"},
	"github.com/redis/rueidis":            {"pkg/fleet"},
	"github.com/miekg/dns":                {"pkg/discovery"},
	"golang.org/x/crypto":                 {"pkg/clienthello"},
}

// dataPath are the packages an event loop runs, and badForDataPath what
// none of them may depend on even transitively: an HTTP stack, metrics
// registries, the Redis client, subprocesses, templates. They belong to
// the control plane; pulled into the data path they would put locks and
// goroutines of their own on the loops' side of the fence.
var (
	dataPath = []string{
		"pkg/rawsys", "pkg/reactor", "pkg/relay", "pkg/udpsession", "pkg/splice",
		"pkg/listener", "pkg/hashring", "pkg/pick", "pkg/breaker", "pkg/health",
		"pkg/pool", "pkg/srclimit", "pkg/ipset", "pkg/proxyproto", "pkg/sockopt",
		"pkg/dialer", "pkg/clock", "pkg/loopguard", "pkg/accesslog", "pkg/flow",
		"pkg/clienthello",
		"pkg/sniroute",
	}
	badForDataPath = []string{
		"net/http", "os/exec", "text/template", "html/template",
		"github.com/prometheus/", "github.com/redis/", "github.com/l4lb/l4lb/cmd/",
	}
)

// testOnly are packages for tests, the bench and generators; nothing that ships may
// depend on them.
var testOnly = []string{"e2e", "internal/e2eutil", "internal/testnet", "internal/arch", "bench", "bench/fleetsim", "bench/healthscale", "pkg/config/internal/gendoc"}
