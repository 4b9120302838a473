package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// withCluster is a valid file with a [cluster] table of the given keys.
func withCluster(keys string) string { return validBase + "[cluster]\n" + keys }

// withRedis is withCluster with store = "redis" and a redis_url first.
func withRedis(keys string) string {
	return withCluster("store = \"redis\"\nredis_url = \"redis://127.0.0.1:6379\"\n" + keys)
}

func TestClusterDefaults(t *testing.T) {
	want := Cluster{Store: "memory", KeyPrefix: "l4lb:", SyncInterval: 2 * time.Second, Timeout: 250 * time.Millisecond, TripQuorum: 1}
	if got := DefaultCluster(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultCluster() = %+v, want %+v", got, want)
	}
	for _, src := range []string{validBase, withCluster(""), withCluster("store = \"memory\"\n")} {
		if got := mustParse(t, src).Cluster; !reflect.DeepEqual(got, want) {
			t.Errorf("Cluster = %+v, want the defaults %+v; source:\n%s", got, want, src)
		}
	}
	// A redis store keeps the defaults of every key it leaves out.
	got := mustParse(t, withRedis("")).Cluster
	want.Store, want.RedisURL = "redis", "redis://127.0.0.1:6379"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("redis with defaults: %+v, want %+v", got, want)
	}
}

func TestClusterAccepts(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name, keys string
		check      func(Cluster) bool
	}{
		{"instance with the memory store", "instance = \"lb-1.example-42\"\n",
			func(c Cluster) bool { return c.Store == "memory" && c.Instance == "lb-1.example-42" }},
		{"empty instance", "instance = \"\"\n", func(c Cluster) bool { return c.Instance == "" }},
		{"trip quorum", "store = \"redis\"\nredis_url = \"redis://h:1\"\ntrip_quorum = 2\n", func(c Cluster) bool { return c.TripQuorum == 2 }},
		{"largest trip quorum", "store = \"redis\"\nredis_url = \"redis://h:1\"\ntrip_quorum = 1000\n", func(c Cluster) bool { return c.TripQuorum == MaxTripQuorum }},
		{"instance of the maximum length", "instance = \"" + long(MaxInstanceLen) + "\"\n",
			func(c Cluster) bool { return len(c.Instance) == MaxInstanceLen }},
	}
	for _, u := range []string{
		"redis://127.0.0.1:6379",
		"redis://127.0.0.1",
		"redis://redis.internal:6379/",
		"redis://user:p%40ss%23word@redis.internal:6379/15",
		"redis://:only-a-password@[::1]:6379/0",
		"rediss://redis.internal:6380",
		"valkey://10.0.0.1:6379",
		"valkeys://10.0.0.1:6379/2",
		"unix:///run/redis/redis.sock",
		"unix:///run/redis/redis.sock?db=3",
		"redis://10.0.0.1:6379?db=1",
		"REDIS://10.0.0.1:6379", // schemes are case-insensitive
	} {
		tests = append(tests, struct {
			name, keys string
			check      func(Cluster) bool
		}{"url " + u, "store = \"redis\"\nredis_url = " + strconv.Quote(u) + "\n", func(c Cluster) bool { return c.RedisURL == u }})
	}
	redis := "store = \"redis\"\nredis_url = \"redis://10.0.0.6:26379\"\n"
	tests = append(tests, []struct {
		name, keys string
		check      func(Cluster) bool
	}{
		{"tls files over redis:// (they imply TLS)", redis + "tls_ca_file = \"/ca.pem\"\ntls_cert_file = \"/c.pem\"\ntls_key_file = \"/c.key\"\ntls_server_name = \"redis.internal\"\n",
			func(c Cluster) bool {
				return c.TLSCAFile == "/ca.pem" && c.TLSCertFile == "/c.pem" && c.TLSKeyFile == "/c.key" && c.TLSServerName == "redis.internal" && c.TLS()
			}},
		{"empty optional strings", redis + "password_file = \"\"\ntls_ca_file = \"\"\ntls_cert_file = \"\"\ntls_key_file = \"\"\ntls_server_name = \"\"\nsentinel_master = \"\"\n",
			func(c Cluster) bool { return !c.TLS() && c.SentinelMaster == "" }},
		{"password file", redis + "password_file = \"/etc/l4lb/redis.pw\"\n", func(c Cluster) bool { return c.PasswordFile == "/etc/l4lb/redis.pw" }},
		{"sentinels", redis + "sentinel_master = \"mymaster\"\nsentinel_addrs = [\"10.0.0.7:26379\", \"[fd00::8]:26379\", \"sentinel-3.internal:26379\"]\n",
			func(c Cluster) bool {
				return c.SentinelMaster == "mymaster" && reflect.DeepEqual(c.SentinelAddrs, []string{"10.0.0.7:26379", "[fd00::8]:26379", "sentinel-3.internal:26379"})
			}},
		{"sentinel master alone", redis + "sentinel_master = \"mymaster\"\n", func(c Cluster) bool { return c.SentinelAddrs == nil }},
		{"no sentinel addrs", redis + "sentinel_addrs = []\n", func(c Cluster) bool { return len(c.SentinelAddrs) == 0 }},
		{"cluster nodes", redis + "redis_addrs = [\"10.0.0.8:6379\", \"[fd00::9]:6380\"]\n",
			func(c Cluster) bool {
				return reflect.DeepEqual(c.RedisAddrs, []string{"10.0.0.8:6379", "[fd00::9]:6380"})
			}},
		{"key prefix of the maximum length", redis + "key_prefix = \"" + long(MaxKeyPrefixLen) + "\"\n",
			func(c Cluster) bool { return len(c.KeyPrefix) == MaxKeyPrefixLen }},
		{"printable key prefix", redis + "key_prefix = \"lb prod/é:\"\n", func(c Cluster) bool { return c.KeyPrefix == "lb prod/é:" }},
		{"shortest intervals", redis + "sync_interval = \"100ms\"\ntimeout = \"10ms\"\n",
			func(c Cluster) bool {
				return c.SyncInterval == 100*time.Millisecond && c.Timeout == 10*time.Millisecond
			}},
		{"longest sync interval", redis + "sync_interval = \"1h\"\ntimeout = \"59m\"\n",
			func(c Cluster) bool { return c.SyncInterval == time.Hour && c.Timeout == 59*time.Minute }},
		{"timeout just below the sync interval", redis + "sync_interval = \"300ms\"\ntimeout = \"299ms\"\n",
			func(c Cluster) bool { return c.Timeout == 299*time.Millisecond }},
		{"a raised sync interval makes room for the default timeout", redis + "sync_interval = \"251ms\"\n",
			func(c Cluster) bool { return c.Timeout == 250*time.Millisecond }},
		{"a rediss url is TLS", "store = \"redis\"\nredis_url = \"rediss://h:1\"\n", func(c Cluster) bool { return c.TLS() }},
		{"a redis url is not", "store = \"redis\"\nredis_url = \"redis://h:1\"\n", func(c Cluster) bool { return !c.TLS() }},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c := mustParse(t, withCluster(tt.keys)).Cluster; !tt.check(c) {
				t.Errorf("decoded %+v", c)
			}
		})
	}
}

func TestClusterRefuses(t *testing.T) {
	const notRedis = `only used with store = "redis"`
	tests := []problem{
		// store
		{"unknown store", withCluster("store = \"etcd\" #!\n"), "cluster.store", `"etcd" is not a cluster store; use one of: memory, redis`},
		{"store not a string", withCluster("store = 1 #!\n"), "cluster.store", "must be a string"},
		{"cluster not a table", "cluster = \"redis\" #!\n" + validBase, "cluster", "must be a table [cluster]"},
		{"misspelt key", withCluster("redis_ulr = \"redis://h:1\" #!\n"), "cluster.redis_ulr", `did you mean "redis_url"?`},
		{"misspelt key of the redis store", withRedis("sentinel_adrs = [] #!\n"), "cluster.sentinel_adrs", `did you mean "sentinel_addrs"?`},
		{"unknown key", withCluster("nodes = 3 #!\n"), "cluster.nodes",
			"allowed in cluster: store, redis_url, password_file, tls_ca_file, tls_cert_file, tls_key_file, tls_server_name, sentinel_master, sentinel_addrs, redis_addrs, key_prefix, sync_interval, timeout, trip_quorum, instance"},

		// redis_url
		{"redis without redis_url", withCluster("store = \"redis\" #!\nkey_prefix = \"x:\"\n"), "cluster.redis_url", `required with store = "redis"`},
		{"empty redis_url", withCluster("store = \"redis\"\nredis_url = \"\" #!\n"), "cluster.redis_url", "must not be empty"},
		{"redis_url not a string", withCluster("store = \"redis\"\nredis_url = 6379 #!\n"), "cluster.redis_url", "must be a string"},
		{"no scheme", withCluster("store = \"redis\"\nredis_url = \"127.0.0.1:6379\" #!\n"), "cluster.redis_url", "has no scheme"},
		{"empty scheme", withCluster("store = \"redis\"\nredis_url = \"://127.0.0.1:6379\" #!\n"), "cluster.redis_url", "missing protocol scheme"},
		{"http scheme", withCluster("store = \"redis\"\nredis_url = \"http://127.0.0.1:6379\" #!\n"), "cluster.redis_url",
			`scheme "http" is not one of redis, rediss, unix, valkey, valkeys`},
		{"bad port", withCluster("store = \"redis\"\nredis_url = \"redis://host:port\" #!\n"), "cluster.redis_url", "not a URL (invalid port"},
		{"port out of range", withCluster("store = \"redis\"\nredis_url = \"redis://host:65536\" #!\n"), "cluster.redis_url", "port 65536 is out of range"},
		{"port zero", withCluster("store = \"redis\"\nredis_url = \"redis://host:0\" #!\n"), "cluster.redis_url", "port 0 is out of range"},
		{"no host", withCluster("store = \"redis\"\nredis_url = \"redis://:6379\" #!\n"), "cluster.redis_url", "names no host"},
		{"no host at all", withCluster("store = \"redis\"\nredis_url = \"rediss://\" #!\n"), "cluster.redis_url", "names no host"},
		{"database not a number", withCluster("store = \"redis\"\nredis_url = \"redis://h:1/prod\" #!\n"), "cluster.redis_url", `the path "/prod" is not a database number`},
		{"negative database", withCluster("store = \"redis\"\nredis_url = \"redis://h:1/-1\" #!\n"), "cluster.redis_url", "is not a database number"},
		{"two path segments", withCluster("store = \"redis\"\nredis_url = \"redis://h:1/0/1\" #!\n"), "cluster.redis_url", "is not a database number"},
		{"database twice", withCluster("store = \"redis\"\nredis_url = \"redis://h:1/2?db=3\" #!\n"), "cluster.redis_url", "named twice"},
		{"bad db parameter", withCluster("store = \"redis\"\nredis_url = \"unix:///run/r.sock?db=x\" #!\n"), "cluster.redis_url", "db must be one database number"},
		{"query parameter", withCluster("store = \"redis\"\nredis_url = \"rediss://h:1?skip_verify=true\" #!\n"), "cluster.redis_url",
			`query parameter "skip_verify" is not accepted`},
		{"fragment", withCluster("store = \"redis\"\nredis_url = \"redis://h:1#x\" #!\n"), "cluster.redis_url", "has a fragment"},
		{"opaque", withCluster("store = \"redis\"\nredis_url = \"redis:h://1\" #!\n"), "cluster.redis_url", "with two slashes"},
		{"unix with a host", withCluster("store = \"redis\"\nredis_url = \"unix://run/redis.sock\" #!\n"), "cluster.redis_url", "names a host"},
		{"unix without a path", withCluster("store = \"redis\"\nredis_url = \"unix://\" #!\n"), "cluster.redis_url", "names no socket file"},
		{"unix with a directory", withCluster("store = \"redis\"\nredis_url = \"unix:///run/redis/\" #!\n"), "cluster.redis_url", "names no socket file"},

		// files and TLS
		{"cert without key", withRedis("tls_cert_file = \"/c.pem\" #!\n"), "cluster.tls_cert_file", "set without tls_key_file"},
		{"key without cert", withRedis("tls_key_file = \"/c.key\" #!\n"), "cluster.tls_key_file", "set without tls_cert_file"},
		{"cert with an empty key", withRedis("tls_cert_file = \"/c.pem\" #!\ntls_key_file = \"\"\n"), "cluster.tls_cert_file", "set without tls_key_file"},
		{"cert not a string beside a key", withRedis("tls_cert_file = 1 #!\ntls_key_file = \"/c.key\"\n"), "cluster.tls_cert_file", "must be a string"},
		{"password_file not a string", withRedis("password_file = true #!\n"), "cluster.password_file", "must be a string"},
		{"tls over a unix socket", withCluster("store = \"redis\"\nredis_url = \"unix:///run/r.sock\"\ntls_ca_file = \"/ca.pem\" #!\n"), "cluster.tls_ca_file",
			"TLS does not apply to a unix socket"},
		{"server name with a space", withRedis("tls_server_name = \"redis internal\" #!\n"), "cluster.tls_server_name", "holds a space"},

		// Sentinel
		{"sentinel addrs without master", withRedis("sentinel_addrs = [\"10.0.0.7:26379\"] #!\n"), "cluster.sentinel_addrs", "set without sentinel_master"},
		{"sentinel addrs with an empty master", withRedis("sentinel_master = \"\"\nsentinel_addrs = [\"10.0.0.7:26379\"] #!\n"), "cluster.sentinel_addrs", "set without sentinel_master"},
		{"sentinel over a unix socket", withCluster("store = \"redis\"\nredis_url = \"unix:///run/r.sock\"\nsentinel_master = \"m\" #!\n"), "cluster.sentinel_master",
			"Sentinels are reached over TCP"},
		{"master with a space", withRedis("sentinel_master = \"my master\" #!\n"), "cluster.sentinel_master", "holds a space"},
		{"sentinel addr without port", withRedis("sentinel_master = \"m\"\nsentinel_addrs = [\n  \"10.0.0.7:26379\",\n  \"10.0.0.8\", #!\n]\n"), "cluster.sentinel_addrs[1]",
			`"10.0.0.8" is not host:port (missing port in address)`},
		{"sentinel addr without host", withRedis("sentinel_master = \"m\"\nsentinel_addrs = [\":26379\"] #!\n"), "cluster.sentinel_addrs[0]", "names no usable host"},
		{"sentinel addr port zero", withRedis("sentinel_master = \"m\"\nsentinel_addrs = [\"h:0\"] #!\n"), "cluster.sentinel_addrs[0]", "must be a number between 1 and 65535"},
		{"sentinel addr port a name", withRedis("sentinel_master = \"m\"\nsentinel_addrs = [\"h:sentinel\"] #!\n"), "cluster.sentinel_addrs[0]", "must be a number between 1 and 65535"},
		{"sentinel addr twice", withRedis("sentinel_master = \"m\"\nsentinel_addrs = [\n\"H:26379\",\n\"h:26379\", #!\n]\n"), "cluster.sentinel_addrs[1]",
			"is already cluster.sentinel_addrs[0] (line 13)"},
		{"cluster node without port", withRedis("redis_addrs = [\"10.0.0.8\"] #!\n"), "cluster.redis_addrs[0]",
			`"10.0.0.8" is not host:port (missing port in address): write e.g. "10.0.0.5:6379"`},
		{"cluster node twice", withRedis("redis_addrs = [\"h:6379\", \"H:6379\"] #!\n"), "cluster.redis_addrs[1]", "is already cluster.redis_addrs[0]"},
		{"cluster nodes with sentinels", withRedis("sentinel_master = \"m\"\nredis_addrs = [\"h:6379\"] #!\n"), "cluster.redis_addrs", "set with sentinel_master"},
		{"cluster nodes with a unix socket", withCluster("store = \"redis\"\nredis_url = \"unix:///run/r.sock\"\nredis_addrs = [\"h:6379\"] #!\n"), "cluster.redis_addrs",
			"Redis Cluster nodes are reached over TCP"},
		{"sentinel addr not a string", withRedis("sentinel_master = \"m\"\nsentinel_addrs = [\"h:1\", 2] #!\n"), "cluster.sentinel_addrs[1]", "must be a string, not the integer 2"},
		{"sentinel addrs not an array", withRedis("sentinel_master = \"m\"\nsentinel_addrs = \"h:1\" #!\n"), "cluster.sentinel_addrs", "must be an array of strings"},

		// key_prefix
		{"empty key prefix", withRedis("key_prefix = \"\" #!\n"), "cluster.key_prefix", "must not be empty"},
		{"long key prefix", withRedis("key_prefix = \"" + strings.Repeat("k", MaxKeyPrefixLen+1) + "\" #!\n"), "cluster.key_prefix", "is 65 bytes long, more than 64"},
		{"key prefix with a control character", withRedis("key_prefix = \"l4lb\\n\" #!\n"), "cluster.key_prefix", "must be printable"},
		{"key prefix with invalid UTF-8", withRedis("key_prefix = \"l4lb\\u0080\" #!\n"), "cluster.key_prefix", "must be printable"},
		{"key prefix with an opening brace", withRedis("key_prefix = \"{l4lb}:\" #!\n"), "cluster.key_prefix", "hash tags"},
		{"key prefix with a closing brace", withRedis("key_prefix = \"l4lb}\" #!\n"), "cluster.key_prefix", "hash tags"},

		// sync_interval and timeout
		{"sync interval too short", withRedis("sync_interval = \"99ms\" #!\n"), "cluster.sync_interval", "must be between 100ms and 1h0m0s"},
		{"sync interval too long", withRedis("sync_interval = \"1h1s\" #!\n"), "cluster.sync_interval", "must be between 100ms and 1h0m0s"},
		{"sync interval zero", withRedis("sync_interval = \"0s\" #!\n"), "cluster.sync_interval", "0s is out of range: must be between 100ms and 1h0m0s"},
		{"sync interval not a duration", withRedis("sync_interval = 2 #!\n"), "cluster.sync_interval", "must be a duration string"},
		{"timeout too short", withRedis("timeout = \"9ms\" #!\n"), "cluster.timeout", "must be at least 10ms"},
		{"timeout negative", withRedis("timeout = \"-1s\" #!\n"), "cluster.timeout", "is negative"},
		{"timeout as long as the sync interval", withRedis("sync_interval = \"1s\"\ntimeout = \"1s\" #!\n"), "cluster.timeout",
			"timeout 1s is not shorter than sync_interval 1s"},
		{"timeout longer than the default sync interval", withRedis("timeout = \"3s\" #!\n"), "cluster.timeout", "is not shorter than sync_interval 2s"},
		{"sync interval below the default timeout", withRedis("sync_interval = \"200ms\" #!\n"), "cluster.sync_interval",
			"timeout 250ms is not shorter than sync_interval 200ms"},

		// instance
		{"instance with a space", withCluster("instance = \"lb 1\" #!\n"), "cluster.instance", "holds a space"},
		{"instance with a tab", withCluster("instance = \"lb\\t1\" #!\n"), "cluster.instance", "must be printable"},
		{"long instance", withCluster("instance = \"" + strings.Repeat("i", MaxInstanceLen+1) + "\" #!\n"), "cluster.instance", "is 129 bytes long"},
		{"instance beyond ASCII", withCluster("instance = \"lb-é\" #!\n"), "cluster.instance", "printable ASCII"},
		{"instance not a string", withCluster("instance = 1 #!\n"), "cluster.instance", "must be a string"},

		// trip_quorum
		{"trip quorum zero", withRedis("trip_quorum = 0 #!\n"), "cluster.trip_quorum", "0 is out of range"},
		{"trip quorum too large", withRedis("trip_quorum = 1001 #!\n"), "cluster.trip_quorum", "1001 is out of range"},
		{"trip quorum not an integer", withRedis("trip_quorum = \"2\" #!\n"), "cluster.trip_quorum", "must be an integer"},
	}
	// Every key of the redis store, set beside the memory one.
	redisKeys := map[string]string{
		"redis_url": `"redis://h:1"`, "password_file": `"/pw"`, "tls_ca_file": `"/ca.pem"`, "tls_cert_file": `"/c.pem"`,
		"tls_key_file": `"/c.key"`, "tls_server_name": `"h"`, "sentinel_master": `"m"`, "sentinel_addrs": `["h:1"]`,
		"redis_addrs": `["h:2"]`, "key_prefix": `"x:"`, "sync_interval": `"1s"`, "timeout": `"1s"`, "trip_quorum": `2`,
	}
	if len(redisKeys) != len(redisOnly) {
		t.Errorf("the test sets %d redis keys, redisOnly has %d", len(redisKeys), len(redisOnly))
	}
	for _, k := range redisOnly {
		v := redisKeys[k]
		tests = append(tests,
			problem{k + " with store = memory", withCluster("store = \"memory\"\n" + k + " = " + v + " #!\n"), "cluster." + k, notRedis},
			problem{k + " with the default store", withCluster(k + " = " + v + " #!\n"), "cluster." + k, `(store left out means "memory")`},
			// Even empty: a key that does nothing is a mistake.
			problem{k + " empty with store = memory", withCluster("store = \"memory\"\n" + k + " = \"\" #!\n"), "cluster." + k, notRedis},
		)
	}
	for _, p := range tests {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, parseErrors(t, p.src)) })
	}
}

// With an unknown store, the keys are judged on their own and the store is
// reported once: not every redis key again as misplaced.
func TestClusterUnknownStoreReportedAlone(t *testing.T) {
	src := withCluster("store = \"redsi\" #!\nredis_url = \"redis://h:1\"\nkey_prefix = \"x:\"\nsync_interval = \"1s\"\n")
	wantOneError(t, problem{"", src, "cluster.store", "is not a cluster store"}, parseErrors(t, src))
	errs := parseErrors(t, withCluster("store = \"redsi\"\nredis_url = \"ftp://h\"\n"))
	if len(errs) != 2 || errs[0].Key != "cluster.store" || errs[1].Key != "cluster.redis_url" {
		t.Errorf("want the store and the url reported: %v", errs)
	}
}

// Every problem of a [cluster] is reported in one run.
func TestClusterReportsEveryProblem(t *testing.T) {
	errs := parseErrors(t, withCluster(`store = "redis"
redis_url = "redis://:6379"
tls_cert_file = "/c.pem"
sentinel_addrs = ["h"]
key_prefix = "{x}"
sync_interval = "10ms"
timeout = "1ms"
instance = "a b"
`))
	var keys []string
	for _, e := range errs {
		keys = append(keys, e.Key)
	}
	want := []string{"cluster.redis_url", "cluster.tls_cert_file", "cluster.sentinel_addrs[0]", "cluster.sentinel_addrs",
		"cluster.key_prefix", "cluster.sync_interval", "cluster.timeout", "cluster.instance"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys = %v, want %v\n%v", keys, want, errs)
	}
}

// A password in redis_url never shows in a message: check prints them.
func TestClusterURLPasswordNotShown(t *testing.T) {
	for _, u := range []string{
		"redis://user:hunter2@host:99999",
		"redis://user:hunter2@host:1/x",
		"http://user:hunter2@host:1",
		"redis://user:hunter2@host:1?x=1",
		"redis://user:hunter2@ho st:1",
		"redis://user:hunter2@host:port",
		"user:hunter2@host:6379",
		"redis://:hunter2@",
	} {
		errs := parseErrors(t, withCluster("store = \"redis\"\nredis_url = "+strconv.Quote(u)+"\n"))
		if strings.Contains(errs.Error(), "hunter2") {
			t.Errorf("%s: the password shows: %v", u, errs)
		}
	}
	errs := parseErrors(t, withCluster("store = \"redis\"\nredis_url = \"redis://user:hunter2@host:99999\"\n"))
	if !strings.Contains(errs.Error(), `"redis://user:xxxxx@host:99999"`) {
		t.Errorf("the URL is not shown redacted: %v", errs)
	}
}

func TestReadRedisPassword(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"s3cret":       "s3cret",
		"s3cret\n":     "s3cret",
		"s3cret\r\n":   "s3cret",
		"s3cret\n\n":   "s3cret\n",
		" s3 cret \n":  " s3 cret ",
		"":             "",
		"\n":           "",
		"two\nlines\n": "two\nlines",
	} {
		path := filepath.Join(dir, "pw")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadRedisPassword(path); err != nil || got != want {
			t.Errorf("ReadRedisPassword(%q) = %q, %v; want %q", content, got, err, want)
		}
	}
	if _, err := ReadRedisPassword(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file read")
	}
}

// writePair writes a self-signed certificate and its key as PEM files and
// returns their paths.
func writePair(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	return testnet.SelfSignedCert(t, name).WriteFiles(t, dir, name)
}

// run must be able to read every [cluster] file: check says so.
func TestCheckHostClusterFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	password := write("password", "s3cret\n")
	empty := write("empty", "")
	newline := write("newline", "\n")
	notPEM := write("not.pem", "not a certificate\n")
	unreadable := write("unreadable", "s3cret")
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	cert, key := writePair(t, dir, "client")
	_, otherKey := writePair(t, dir, "other")
	missing := filepath.Join(dir, "missing")
	q := strconv.Quote

	ok := []string{
		withRedis(""),
		withRedis("password_file = " + q(password) + "\n"),
		withRedis("tls_ca_file = " + q(cert) + "\n"),
		withRedis("tls_cert_file = " + q(cert) + "\ntls_key_file = " + q(key) + "\n"),
		withRedis("tls_ca_file = " + q(cert) + "\ntls_cert_file = " + q(cert) + "\ntls_key_file = " + q(key) + "\npassword_file = " + q(password) + "\n"),
		withCluster("instance = \"lb-1\"\n"),
	}
	for _, src := range ok {
		if errs := hostErrors(t, src); errs != nil {
			t.Errorf("%v\nsource:\n%s", errs, src)
		}
	}

	tests := []problem{
		{"missing password file", withRedis("password_file = " + q(missing) + " #!\n"), "cluster.password_file", "cannot read the Redis password"},
		{"password file a directory", withRedis("password_file = " + q(dir) + " #!\n"), "cluster.password_file", "cannot read the Redis password"},
		{"empty password file", withRedis("password_file = " + q(empty) + " #!\n"), "cluster.password_file", "is empty"},
		{"password file of one newline", withRedis("password_file = " + q(newline) + " #!\n"), "cluster.password_file", "is empty"},
		{"missing CA", withRedis("tls_ca_file = " + q(missing) + " #!\n"), "cluster.tls_ca_file", "cannot read the CA bundle"},
		{"CA not PEM", withRedis("tls_ca_file = " + q(notPEM) + " #!\n"), "cluster.tls_ca_file", "holds no PEM certificate"},
		{"CA empty", withRedis("tls_ca_file = " + q(empty) + " #!\n"), "cluster.tls_ca_file", "holds no PEM certificate"},
		{"missing client certificate", withRedis("tls_cert_file = " + q(missing) + " #!\ntls_key_file = " + q(key) + "\n"), "cluster.tls_cert_file",
			"cannot read the client certificate"},
		{"missing client key", withRedis("tls_cert_file = " + q(cert) + "\ntls_key_file = " + q(missing) + " #!\n"), "cluster.tls_key_file",
			"cannot read the client certificate's key"},
		{"empty client key", withRedis("tls_cert_file = " + q(cert) + "\ntls_key_file = " + q(empty) + " #!\n"), "cluster.tls_key_file", "is empty"},
		{"key of another certificate", withRedis("tls_cert_file = " + q(cert) + " #!\ntls_key_file = " + q(otherKey) + "\n"), "cluster.tls_cert_file",
			"cannot load the client certificate with its key"},
		{"certificate and key swapped", withRedis("tls_cert_file = " + q(key) + " #!\ntls_key_file = " + q(cert) + "\n"), "cluster.tls_cert_file",
			"cannot load the client certificate with its key"},
	}
	if os.Geteuid() != 0 { // root reads any file
		tests = append(tests, problem{"unreadable password file", withRedis("password_file = " + q(unreadable) + " #!\n"), "cluster.password_file", "permission denied"})
	}
	for _, p := range tests {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, hostErrors(t, p.src)) })
	}
}
