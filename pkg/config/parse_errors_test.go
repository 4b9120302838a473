package config

import (
	"strings"
	"testing"
)

// TestParseReportsEachProblem checks one problem per case: exactly one error,
// naming the right key, on the line marked "#!", with a message that says
// what is wrong.
func TestParseReportsEachProblem(t *testing.T) {
	tests := []struct {
		name string
		src  string
		key  string
		msg  string
	}{
		// Syntax.
		{"syntax error", validBase + "[global #!\n", "", "TOML syntax error"},
		{"duplicate key is a syntax error", validBase + "[log]\nlevel = \"info\"\nlevel = \"warn\" #!\n", "", "already been defined"},

		// Unknown keys, at every level.
		{"unknown top-level table", validBase + "[metrics] #!\nport = 1\n", "metrics", "unknown key; allowed here: global, admin, log, cluster, listener, pool"},
		{"unknown key in global with suggestion", validBase + "[global]\nshutdown_timout = \"1s\" #!\n", "global.shutdown_timout", `did you mean "shutdown_timeout"?`},
		{"unknown key in admin", validBase + "[admin]\naddress = \"127.0.0.1:9090\" #!\n", "admin.address", "unknown key; allowed in admin: listen"},
		{"unknown key in log", validBase + "[log]\nlevl = \"info\" #!\n", "log.levl", `did you mean "level"?`},
		{"unknown key in listener", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\nbacklg = 5 #!\n"), "listener[0].backlg", `did you mean "backlog"?`},
		{"unknown key in pool", withPool("algoritm = \"maglev\" #!\n"), "pool.web.algoritm", `did you mean "algorithm"?`},
		{"unknown key in backend", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nwieght = 2 #!\n"), "pool.web.backend[0].wieght", `did you mean "weight"?`},
		{"unknown key in health", validBase + "[pool.web.health]\nintervall = \"1s\" #!\n", "pool.web.health.intervall", `did you mean "interval"?`},
		{"unknown key in breaker", validBase + "[pool.web.breaker]\nthreshold = 5 #!\n", "pool.web.breaker.threshold", "unknown key; allowed in pool.web.breaker: failures, window"},
		{"unknown dotted key in pool", withPool("health.rize = 2 #!\n"), "pool.web.health.rize", `did you mean "rise"?`},

		// Wrong types and shapes.
		{"duration written as a number", validBase + "[pool.web.breaker]\ncooldown = 30 #!\n", "pool.web.breaker.cooldown", `must be a duration string such as "2s", not the integer 30`},
		{"duration without unit", validBase + "[pool.web.breaker]\nwindow = \"120\" #!\n", "pool.web.breaker.window", `"120" is not a duration`},
		{"duration written as a date", validBase + "[global]\nshutdown_timeout = 1979-05-27 #!\n", "global.shutdown_timeout", "not a date-time"},
		{"duration in words", validBase + "[global]\nshutdown_timeout = \"2 minutes\" #!\n", "global.shutdown_timeout", `"2 minutes" is not a duration`},
		{"integer written as a string", validBase + "[global]\naccept_loops = \"4\" #!\n", "global.accept_loops", `must be an integer, not the string "4"`},
		{"integer written as a float", withPool("retries = 1.5 #!\n"), "pool.web.retries", "must be an integer, not the float 1.5"},
		{"boolean written as a string", validBase + "[pool.web.health]\nenabled = \"yes\" #!\n", "pool.web.health.enabled", `must be true or false, not the string "yes"`},
		{"string written as a number", withListener("name = 7 #!\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"), "listener[0].name", "must be a string, not the integer 7"},
		{"float written as a string", withPool("hash_balance_factor = \"1.25\" #!\n"), "pool.web.hash_balance_factor", `must be a number, not the string "1.25"`},
		{"table written as a value", withPool("health = true #!\n"), "pool.web.health", "must be a table [pool.web.health], not the boolean true"},
		{"section written as a value", "global = 1 #!\n" + validBase, "global", "must be a table [global]"},
		{"listener as a single table", "[listener] #!\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n" + poolWeb, "listener", "must be an array of tables: write [[listener]], with double brackets"},
		{"backend as a single table", listenerWeb + "[pool.web.backend] #!\naddr = \"127.0.0.1:9001\"\n", "pool.web.backend", "write [[pool.web.backend]], with double brackets"},

		// Required keys: reported on the header of their table.
		{"listener without name", "[[listener]] #!\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n" + poolWeb, "listener[0].name", "required key is missing: every [[listener]] needs a unique name"},
		{"listener without bind", "[[listener]] #!\nname = \"web\"\npool = \"web\"\n" + poolWeb, "listener[0].bind", "required key is missing: the IP:port to listen on"},
		{"listener without pool", "[[listener]] #!\nname = \"web\"\nbind = \"127.0.0.1:8080\"\n" + poolWeb, "listener[0].pool", "required key is missing: the name of the [pool.NAME]"},
		{"backend without addr", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n[[pool.web.backend]] #!\nweight = 2\n"), "pool.web.backend[1].addr", "required key is missing: the backend's IP:port"},
		{"no listener at all", poolWeb, "listener", "no [[listener]]: nothing to serve"},
		{"empty listener array", "listener = [] #!\n" + poolWeb, "listener", "no [[listener]]: nothing to serve"},

		// Listeners.
		{"empty listener name", withListener("name = \"\" #!\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"), "listener[0].name", "name must not be empty"},
		{"listener name with a space", withListener("name = \"my web\" #!\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"), "listener[0].name", `name "my web" may contain only letters, digits`},
		{"listener name too long", withListener("name = \"" + strings.Repeat("x", 65) + "\" #!\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"), "listener[0].name", "is longer than 64 characters"},
		{"duplicate listener name", validBase + "[[listener]]\nname = \"web\" #!\nbind = \"127.0.0.1:8081\"\npool = \"web\"\n", "listener[1].name", `duplicate listener name "web": already used by listener[0] (line 1)`},
		{"duplicate bind", validBase + "[[listener]]\nname = \"web2\"\nbind = \"127.0.0.1:8080\" #!\npool = \"web\"\n", "listener[1].bind", `duplicate bind "127.0.0.1:8080": listener[0] (line 1) already listens on 127.0.0.1:8080`},
		{"duplicate bind IPv4-mapped spelling", validBase + "[[listener]]\nname = \"web2\"\nbind = \"[::ffff:127.0.0.1]:8080\" #!\npool = \"web\"\n", "listener[1].bind", "already listens on 127.0.0.1:8080"},
		{"duplicate IPv6 bind", "[[listener]]\nname = \"a\"\nbind = \"[::1]:80\"\npool = \"web\"\n[[listener]]\nname = \"b\"\nbind = \"[0:0::1]:80\" #!\npool = \"web\"\n" + poolWeb, "listener[1].bind", "already listens on [::1]:80"},
		{"bind without port", withListener("name = \"web\"\nbind = \"127.0.0.1\" #!\npool = \"web\"\n"), "listener[0].bind", `"127.0.0.1" is not host:port`},
		{"bind IPv6 without brackets", withListener("name = \"web\"\nbind = \"::1:8080\" #!\npool = \"web\"\n"), "listener[0].bind", "write an IPv6 address in brackets"},
		{"bind port not a number", withListener("name = \"web\"\nbind = \"127.0.0.1:http\" #!\npool = \"web\"\n"), "listener[0].bind", `port "http" is not a number`},
		{"bind port out of range", withListener("name = \"web\"\nbind = \"127.0.0.1:65536\" #!\npool = \"web\"\n"), "listener[0].bind", "port 65536 is out of range 1..65535"},
		{"bind port zero", withListener("name = \"web\"\nbind = \"127.0.0.1:0\" #!\npool = \"web\"\n"), "listener[0].bind", "port 0 is out of range 1..65535"},
		{"bind host is a name", withListener("name = \"web\"\nbind = \"localhost:8080\" #!\npool = \"web\"\n"), "listener[0].bind", `host "localhost" must be an IP literal (IPv4 or [IPv6]), not a name`},
		{"bind host is no valid IP", withListener("name = \"web\"\nbind = \"1.2.3.4.5:8080\" #!\npool = \"web\"\n"), "listener[0].bind", `host "1.2.3.4.5" is not a valid IP address (IPv4 address too long)`},
		{"bind broadcast", withListener("name = \"web\"\nbind = \"255.255.255.255:8080\" #!\npool = \"web\"\n"), "listener[0].bind", "255.255.255.255 is the broadcast address, which TCP cannot use"},
		{"bind without host", withListener("name = \"web\"\nbind = \":8080\" #!\npool = \"web\"\n"), "listener[0].bind", "has no host: write 0.0.0.0"},
		{"bind empty", withListener("name = \"web\"\nbind = \"\" #!\npool = \"web\"\n"), "listener[0].bind", "must not be empty"},
		{"bind multicast", withListener("name = \"web\"\nbind = \"224.0.0.1:8080\" #!\npool = \"web\"\n"), "listener[0].bind", "multicast"},
		{"unknown protocol", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"sctp\" #!\npool = \"web\"\n"), "listener[0].protocol", `unknown protocol "sctp"; use "tcp" or "udp"`},
		{"protocol in capitals", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"UDP\" #!\npool = \"web\"\n"), "listener[0].protocol", `unknown protocol "UDP"`},
		{"listener pool undefined", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"api\" #!\n"), "listener[0].pool", `pool "api" is not defined; defined pools: web`},
		{"listener pool empty", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"\" #!\n"), "listener[0].pool", "must not be empty"},
		{"negative backlog", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\nbacklog = -1 #!\n"), "listener[0].backlog", "-1 is out of range: must be between 0 and"},

		// Pools.
		{"pool without backends", listenerWeb + "[pool.web] #!\nretries = 1\n", "pool.web.backend", `pool "web" has no backends: add at least one [[pool.web.backend]]`},
		{"pool with only health", listenerWeb + "[pool.web.health] #!\nrise = 1\n", "pool.web.backend", `pool "web" has no backends`},
		{"pool name with a slash", validBase + "[pool.\"a/b\"] #!\n[[pool.\"a/b\".backend]]\naddr = \"127.0.0.1:9001\"\n", `pool."a/b"`, `name "a/b" may contain only letters`},
		{"unknown algorithm", withPool("algorithm = \"rr\" #!\n"), "pool.web.algorithm", `"rr" is not a load-balancing algorithm; use one of: round-robin, weighted-round-robin, least-conn, random, p2c, ip-hash, consistent-hash, maglev`},
		{"unknown hash key", withPool("hash_key = \"dest-ip\" #!\n"), "pool.web.hash_key", `"dest-ip" is not a hash key; use one of: source-ip, source-ip-port`},
		{"zero connect timeout", withPool("connect_timeout = \"0s\" #!\n"), "pool.web.connect_timeout", "0s is out of range: must be"},
		{"connect budget shorter than connect timeout", withPool("connect_timeout = \"10s\"\nconnect_budget = \"5s\" #!\n"), "pool.web.connect_budget", "connect_budget 5s is shorter than connect_timeout 10s: not even the first dial could take its full time"},
		{"connect budget shorter than the default connect timeout", withPool("connect_budget = \"1s\" #!\n"), "pool.web.connect_budget", "connect_budget 1s is shorter than connect_timeout 2s"},
		{"zero connect budget", withPool("connect_budget = \"0s\" #!\n"), "pool.web.connect_budget", "0s is out of range: must be"},
		{"connect budget as a number", withPool("connect_budget = 5 #!\n"), "pool.web.connect_budget", `must be a duration string such as "2s", not the integer 5`},
		{"negative idle timeout", withPool("idle_timeout = \"-1m\" #!\n"), "pool.web.idle_timeout", `"-1m" is negative`},
		{"zero idle timeout", withPool("idle_timeout = \"0s\" #!\n"), "pool.web.idle_timeout", "0s is out of range: must be"},
		{"negative retries", withPool("retries = -1 #!\n"), "pool.web.retries", "-1 is out of range: must be between 0 and 16"},
		{"too many retries", withPool("retries = 17 #!\n"), "pool.web.retries", "17 is out of range: must be between 0 and 16"},
		{"negative slow start", withPool("slow_start = \"-5s\" #!\n"), "pool.web.slow_start", `"-5s" is negative`},
		{"balance factor of one", withPool("hash_balance_factor = 1.0 #!\n"), "pool.web.hash_balance_factor", "must be 0 (off) or greater than 1.0"},
		{"negative balance factor", withPool("hash_balance_factor = -2 #!\n"), "pool.web.hash_balance_factor", "must be 0 (off) or greater than 1.0"},
		{"infinite balance factor", withPool("hash_balance_factor = inf #!\n"), "pool.web.hash_balance_factor", "must be a finite number"},
		{"zero ring vnodes", withPool("ring_vnodes = 0 #!\n"), "pool.web.ring_vnodes", "0 is out of range: must be between 1 and 10000"},
		{"too many ring vnodes", withPool("ring_vnodes = 10001 #!\n"), "pool.web.ring_vnodes", "must be between 1 and 10000"},
		{"maglev size not prime", withPool("maglev_table_size = 65536 #!\n"), "pool.web.maglev_table_size", "65536 is not prime: Maglev needs a prime table size, e.g. 65537"},
		{"maglev size below backend count", listenerWeb + "[pool.web]\nmaglev_table_size = 2 #!\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9003\"\n", "pool.web.maglev_table_size", "2 is smaller than the number of backends (3): use a prime at least 100 times larger, e.g. 307"},
		{"maglev size too large", withPool("maglev_table_size = 10000079 #!\n"), "pool.web.maglev_table_size", "must be between 1 and 10000019"},

		// Backends.
		{"duplicate backend addr", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\" #!\n"), "pool.web.backend[1].addr", `duplicate backend "127.0.0.1:9001": same address as pool.web.backend[0] (line 6)`},
		{"duplicate IPv6 backend addr", withBackends("[[pool.web.backend]]\naddr = \"[::1]:9001\"\n[[pool.web.backend]]\naddr = \"[0::1]:9001\" #!\n"), "pool.web.backend[1].addr", "duplicate backend"},
		{"duplicate backend id", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nid = \"a\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nid = \"a\" #!\n"), "pool.web.backend[1].id", `duplicate backend id "a": already the identity of pool.web.backend[0] (line 6)`},
		{"backend addr equal to another id", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nid = \"127.0.0.1:9002\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\" #!\n"), "pool.web.backend[1].addr", "is already the id of pool.web.backend[0]"},
		{"backend port zero", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:0\" #!\n"), "pool.web.backend[0].addr", "port 0 is out of range 1..65535"},
		{"backend host is a name", withBackends("[[pool.web.backend]]\naddr = \"db.internal:5432\" #!\n"), "pool.web.backend[0].addr", `host "db.internal" must be an IP literal (IPv4 or [IPv6])`},
		{"backend host is no valid IPv4", withBackends("[[pool.web.backend]]\naddr = \"300.1.2.3:5432\" #!\n"), "pool.web.backend[0].addr", `host "300.1.2.3" is not a valid IP address (IPv4 field has value >255); write IPv4 as four numbers 0..255`},
		{"backend host is a short IPv4", withBackends("[[pool.web.backend]]\naddr = \"10.0.1:5432\" #!\n"), "pool.web.backend[0].addr", "is not a valid IP address (IPv4 address too short)"},
		{"backend host is no valid IPv6", withBackends("[[pool.web.backend]]\naddr = \"[::g]:5432\" #!\n"), "pool.web.backend[0].addr", `host "::g" is not a valid IP address`},
		{"backend broadcast", withBackends("[[pool.web.backend]]\naddr = \"255.255.255.255:9001\" #!\n"), "pool.web.backend[0].addr", "255.255.255.255 is the broadcast address, which TCP cannot use"},
		{"backend IPv4 multicast", withBackends("[[pool.web.backend]]\naddr = \"224.0.0.1:9001\" #!\n"), "pool.web.backend[0].addr", "224.0.0.1 is a multicast address"},
		{"backend IPv6 multicast", withBackends("[[pool.web.backend]]\naddr = \"[ff02::1]:9001\" #!\n"), "pool.web.backend[0].addr", "ff02::1 is a multicast address"},
		{"backend IPv6 unspecified address", withBackends("[[pool.web.backend]]\naddr = \"[::]:9001\" #!\n"), "pool.web.backend[0].addr", ":: is the unspecified address, which cannot be dialed"},
		{"every backend weight zero", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = 0\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nweight = 0 #!\n"), "pool.web.backend[1].weight", "every backend of the pool has weight 0, which takes no new connections, so every client would be refused"},
		{"every backend a backup", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nbackup = true\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nbackup = true #!\n"), "pool.web.backend[1].backup", "every backend of the pool is a backup (backup = true), so there is no primary for them to stand in for"},
		{"only backend a backup", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nbackup = true #!\n"), "pool.web.backend[0].backup", "every backend of the pool is a backup"},
		{"backup not a boolean", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nbackup = \"yes\" #!\n"), "pool.web.backend[1].backup", "must be true or false"},
		{"backup on the pool", withPool("backup = true #!\n"), "pool.web.backup", "backup is a key of each [[pool.web.backend]]"},
		{"only backend weight zero", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = 0 #!\n"), "pool.web.backend[0].weight", "every backend of the pool has weight 0"},
		{"consistent-hash ring too large", listenerWeb + "[pool.web]\nalgorithm = \"consistent-hash\"\nring_vnodes = 10000 #!\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = 256\n[[pool.web.backend]]\naddr = \"127.0.0.1:9002\"\nweight = 256\n", "pool.web.ring_vnodes", "the consistent-hash ring would have 5120000 points (ring_vnodes 10000 x total weight 512), more than the 4194304 allowed: lower ring_vnodes or the weights"},
		{"backend unspecified address", withBackends("[[pool.web.backend]]\naddr = \"0.0.0.0:9001\" #!\n"), "pool.web.backend[0].addr", "unspecified address, which cannot be dialed"},
		{"backend weight too high", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = 257 #!\n"), "pool.web.backend[0].weight", "257 is out of range: must be between 0 and 256"},
		{"backend weight negative", withBackends("[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\nweight = -1 #!\n"), "pool.web.backend[0].weight", "must be between 0 and 256"},
		{"inline backend array", withBackends("backend = [\n  { addr = \"127.0.0.1:9001\" },\n  { addr = \"127.0.0.1\" }, #!\n]\n"), "pool.web.backend[1].addr", `"127.0.0.1" is not host:port`},

		// Health.
		{"zero health interval", validBase + "[pool.web.health]\ninterval = \"0s\" #!\n", "pool.web.health.interval", "0s is out of range: must be"},
		{"zero health timeout", validBase + "[pool.web.health]\ntimeout = \"0ms\" #!\n", "pool.web.health.timeout", "0s is out of range: must be"},
		{"health timeout above interval", validBase + "[pool.web.health]\ninterval = \"1s\"\ntimeout = \"3s\" #!\n", "pool.web.health.timeout", "timeout 3s is longer than interval 1s: a check would still be running"},
		{"health interval below default timeout", validBase + "[pool.web.health]\ninterval = \"500ms\" #!\n", "pool.web.health.interval", "timeout 1s is longer than interval 500ms"},
		{"zero rise", validBase + "[pool.web.health]\nrise = 0 #!\n", "pool.web.health.rise", "0 is out of range: must be between 1 and 1000"},
		{"zero fall", validBase + "[pool.web.health]\nfall = 0 #!\n", "pool.web.health.fall", "must be between 1 and 1000"},

		// Breaker.
		{"zero failures", validBase + "[pool.web.breaker]\nfailures = 0 #!\n", "pool.web.breaker.failures", "0 is out of range: must be between 1 and 1000000"},
		{"zero window", validBase + "[pool.web.breaker]\nwindow = \"0s\" #!\n", "pool.web.breaker.window", "0s is out of range: must be"},
		{"min ratio above one", validBase + "[pool.web.breaker]\nmin_ratio = 1.5 #!\n", "pool.web.breaker.min_ratio", "1.5 is out of range: must be between 0 (off) and 1"},
		{"negative min ratio", validBase + "[pool.web.breaker]\nmin_ratio = -0.1 #!\n", "pool.web.breaker.min_ratio", "out of range"},
		{"negative min volume", validBase + "[pool.web.breaker]\nmin_volume = -1 #!\n", "pool.web.breaker.min_volume", "must be between 0 and 1000000"},
		{"zero cooldown", validBase + "[pool.web.breaker]\ncooldown = \"0s\" #!\n", "pool.web.breaker.cooldown", "0s is out of range: must be"},
		{"max cooldown below cooldown", validBase + "[pool.web.breaker]\ncooldown = \"1m\"\nmax_cooldown = \"30s\" #!\n", "pool.web.breaker.max_cooldown", "max_cooldown 30s is shorter than cooldown 1m0s"},
		{"cooldown above default max", validBase + "[pool.web.breaker]\ncooldown = \"10m\" #!\n", "pool.web.breaker.cooldown", "max_cooldown 5m0s is shorter than cooldown 10m0s"},
		{"zero successes", validBase + "[pool.web.breaker]\nsuccesses = 0 #!\n", "pool.web.breaker.successes", "must be between 1 and 1000000"},
		{"zero early reset window", validBase + "[pool.web.breaker]\nearly_reset_window = \"0s\" #!\n", "pool.web.breaker.early_reset_window", "0s is out of range: must be"},
		{"early reset window without unit", validBase + "[pool.web.breaker]\nearly_reset_window = \"5\" #!\n", "pool.web.breaker.early_reset_window", `"5" is not a duration`},
		{"early reset as a number", validBase + "[pool.web.breaker]\ncount_early_reset = 1 #!\n", "pool.web.breaker.count_early_reset", "must be true or false, not the integer 1"},

		// Global, admin, log.
		{"negative shutdown timeout", validBase + "[global]\nshutdown_timeout = \"-1s\" #!\n", "global.shutdown_timeout", `"-1s" is negative`},
		{"negative max connections", validBase + "[global]\nmax_connections = -1 #!\n", "global.max_connections", "-1 is out of range: must be between 0 and"},
		{"negative accept loops", validBase + "[global]\naccept_loops = -1 #!\n", "global.accept_loops", "must be between 0 and 1024"},
		{"too many accept loops", validBase + "[global]\naccept_loops = 1025 #!\n", "global.accept_loops", "1025 is out of range: must be between 0 and 1024"},
		{"pipe smaller than a page", validBase + "[global]\npipe_size = 1000 #!\n", "global.pipe_size", "1000 is out of range: must be between 4096 and"},
		{"pipe too large", validBase + "[global]\npipe_size = 2147483648 #!\n", "global.pipe_size", "2147483648 is out of range"},
		{"busy poll too long", validBase + "[global]\nbusy_poll = \"5ms\" #!\n", "global.busy_poll", `5ms is out of range: must be "0s" (off) or between 1µs and 1ms`},
		{"busy poll not a duration", validBase + "[global]\nbusy_poll = 20 #!\n", "global.busy_poll", "must be a duration string"},
		{"wake coalesce too long", validBase + "[global]\nwake_coalesce = \"2ms\" #!\n", "global.wake_coalesce", `2ms is out of range: must be "0s" (off) or between 1µs and 1ms`},
		{"wake coalesce below a microsecond", validBase + "[global]\nwake_coalesce = \"500ns\" #!\n", "global.wake_coalesce", `500ns is out of range`},
		{"wake coalesce a number", validBase + "[global]\nwake_coalesce = 20 #!\n", "global.wake_coalesce", "must be a duration string"},
		{"admin listen is a name", validBase + "[admin]\nlisten = \"localhost:9090\" #!\n", "admin.listen", `must be an IP literal (IPv4 or [IPv6]), not a name: l4lb does not resolve DNS (or "" to turn the admin endpoint off)`},
		{"admin listen without port", validBase + "[admin]\nlisten = \"127.0.0.1\" #!\n", "admin.listen", "is not host:port"},
		{"admin token file as a number", validBase + "[admin]\ntoken_file = 7 #!\n", "admin.token_file", "must be a string, not the integer 7"},
		{"zero admin connections", validBase + "[admin]\nmax_connections = 0 #!\n", "admin.max_connections", "0 is out of range: must be between 1 and 65536"},
		{"too many admin connections", validBase + "[admin]\nmax_connections = 65537 #!\n", "admin.max_connections", "must be between 1 and 65536"},
		{"admin listen on a listener bind", validBase + "[admin]\nlisten = \"127.0.0.1:8080\" #!\n", "admin.listen", `"127.0.0.1:8080" is also the bind of listener[0] (line 1)`},
		{"unknown log level", validBase + "[log]\nlevel = \"verbose\" #!\n", "log.level", `"verbose" is not a log level; use one of: debug, info, warn, error`},
		{"unknown log format", validBase + "[log]\nformat = \"xml\" #!\n", "log.format", `"xml" is not a log format; use one of: text, json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, tt.src)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			e := errs[0]
			if e.Key != tt.key {
				t.Errorf("key = %q, want %q (error: %v)", e.Key, tt.key, e)
			}
			if want := markedLine(t, tt.src); e.Line != want {
				t.Errorf("line = %d, want %d (error: %v)", e.Line, want, e)
			}
			if !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", e.Msg, tt.msg)
			}
			if e.File != "test.toml" {
				t.Errorf("file = %q, want test.toml", e.File)
			}
		})
	}
}

// TestParseReportsAllProblemsAtOnce checks that one run reports every
// problem, in line order, each with its own key and line.
func TestParseReportsAllProblemsAtOnce(t *testing.T) {
	src := `[global]
accept_loops = -1
note = """
a multi-line string [not.a.table]
pipe_size = 1
"""
[[listener]]
name = "web"
bind = "localhost:80"
pool = "nope"
[[listener]]
bind = "127.0.0.1:81"
pool = "web"
[pool.web]
algorithm = "fastest"
[[pool.web.backend]]
addr = "127.0.0.1:9001"
weight = 300
[pool.web.health]
timeout = "1 second"
[pool.web.breaker]
min_ratio = 2.0
`
	want := []struct {
		line int
		key  string
	}{
		{2, "global.accept_loops"},
		{3, "global.note"},
		{9, "listener[0].bind"},
		{10, "listener[0].pool"},
		{11, "listener[1].name"},
		{15, "pool.web.algorithm"},
		{18, "pool.web.backend[0].weight"},
		{20, "pool.web.health.timeout"},
		{22, "pool.web.breaker.min_ratio"},
	}
	errs := parseErrors(t, src)
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if errs[i].Line != w.line || errs[i].Key != w.key {
			t.Errorf("error %d = %v, want line %d key %s", i, errs[i], w.line, w.key)
		}
	}
}

// TestParseReportsUndefinedPoolAlongsideBadPoolTable checks that a pool
// table of the wrong type does not hide the listener that names it.
func TestParseReportsUndefinedPoolAlongsideBadPoolTable(t *testing.T) {
	errs := parseErrors(t, "pool = 3\n"+listenerWeb)
	got := errs.Error()
	want := "test.toml:1: pool: must be a table [pool], not the integer 3\n" +
		"test.toml:5: listener[0].pool: pool \"web\" is not defined; no [pool.NAME] table is defined"
	if got != want {
		t.Errorf("errors =\n%s\nwant\n%s", got, want)
	}
}
