package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Cluster is [cluster]: where breaker state and manual disables are kept,
// and how a fleet of l4lb instances shares them.
type Cluster struct {
	Store          string        // "memory" (default) | "redis"
	RedisURL       string        // redis://[user:pass@]host:port[/db] | rediss://... (TLS) | unix:///path; required when Store is "redis"
	PasswordFile   string        // file whose content (one trailing newline trimmed) is the password; overrides the URL's
	TLSCAFile      string        // PEM CA bundle to verify the server (implies TLS)
	TLSCertFile    string        // client certificate (needs TLSKeyFile)
	TLSKeyFile     string        // the client certificate's private key (needs TLSCertFile)
	TLSServerName  string        // name to verify instead of the URL's host
	SentinelMaster string        // when set, redis_url's host and SentinelAddrs are Sentinels monitoring this master set
	SentinelAddrs  []string      // more Sentinel host:port
	RedisAddrs     []string      // more Redis Cluster nodes host:port, beside redis_url's
	KeyPrefix      string        // default "l4lb:"
	SyncInterval   time.Duration // default 2s: the snapshot backstop refresh and the store's health ping
	Timeout        time.Duration // bound of one store operation, default 250ms
	Instance       string        // "" here; the caller fills hostname-pid
	TripQuorum     int           // instances whose trips within the window take a backend out for the fleet; default 1
}

// TLS reports whether the store is reached over TLS: a rediss or valkeys
// URL, or any TLS file or server name set.
func (c Cluster) TLS() bool {
	if u, err := url.Parse(c.RedisURL); err == nil && (u.Scheme == "rediss" || u.Scheme == "valkeys") {
		return true
	}
	return c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != "" || c.TLSServerName != ""
}

// ReadRedisPassword returns the content of path, one trailing newline
// trimmed: the password of [cluster] password_file.
func ReadRedisPassword(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := string(data)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, nil
}

// redisOnly are the [cluster] keys that mean nothing with store =
// "memory", in the order they are read. store and instance apply to both.
var redisOnly = []string{
	"redis_url", "password_file", "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name",
	"sentinel_master", "sentinel_addrs", "redis_addrs", "key_prefix", "sync_interval", "timeout", "trip_quorum",
}

// decodeCluster reads [cluster].
func decodeCluster(t *table, cl *Cluster) {
	storeKnown := t.oneOf("store", &cl.Store, "cluster store")
	// With an unknown store every key is judged on its own: the store is
	// reported once, alone.
	redis := !storeKnown || cl.Store == StoreRedis
	notRedis := `only used with store = "redis"; the store is "memory", which keeps breaker state in this process`
	if !t.written("store") {
		notRedis += ` (store left out means "memory")`
	}
	misplaced := map[string]bool{}
	for _, k := range redisOnly {
		misplaced[k] = t.misplaced(k, redis, "%s", notRedis)
	}
	str := func(k string, dst *string) bool { return !misplaced[k] && t.str(k, dst) }

	scheme := ""
	if storeKnown && cl.Store == StoreRedis && !t.written("redis_url") {
		t.c.addAt(t.c.pos.line(t.keyOf("store")), t.keyOf("redis_url"), `required with store = "redis": the Redis server, e.g. "redis://127.0.0.1:6379"`)
	}
	if str("redis_url", &cl.RedisURL) {
		scheme = checkRedisURL(t.c, t.keyOf("redis_url"), cl.RedisURL)
	}
	str("password_file", &cl.PasswordFile)
	var tlsSet []string
	// A key set but unusable (misplaced, not a string) is reported
	// already: the other of the pair is not judged against it.
	unusable := map[string]bool{}
	for _, k := range []struct {
		name string
		dst  *string
	}{{"tls_ca_file", &cl.TLSCAFile}, {"tls_cert_file", &cl.TLSCertFile}, {"tls_key_file", &cl.TLSKeyFile}, {"tls_server_name", &cl.TLSServerName}} {
		read := str(k.name, k.dst)
		unusable[k.name] = t.written(k.name) && !read
		if read && *k.dst != "" {
			tlsSet = append(tlsSet, k.name)
		}
	}
	pairKnown := !unusable["tls_cert_file"] && !unusable["tls_key_file"]
	switch {
	case pairKnown && cl.TLSCertFile != "" && cl.TLSKeyFile == "":
		t.c.add(t.keyOf("tls_cert_file"), "set without tls_key_file: a client certificate needs its private key")
	case pairKnown && cl.TLSKeyFile != "" && cl.TLSCertFile == "":
		t.c.add(t.keyOf("tls_key_file"), "set without tls_cert_file: a private key needs its client certificate")
	}
	if cl.TLSServerName != "" {
		checkWord(t.c, t.keyOf("tls_server_name"), cl.TLSServerName, "a server name", 253)
	}
	if scheme == "unix" && len(tlsSet) > 0 {
		t.c.add(t.keyOf(tlsSet[0]), "TLS does not apply to a unix socket, and redis_url is a unix:// URL: remove the tls_* keys or connect over TCP (rediss://host:port)")
	}

	masterRead := str("sentinel_master", &cl.SentinelMaster)
	// A sentinel_master that is misplaced or not a string is reported
	// already: sentinel_addrs is not judged against it.
	masterUnknown := t.written("sentinel_master") && !masterRead
	if cl.SentinelMaster != "" {
		if checkWord(t.c, t.keyOf("sentinel_master"), cl.SentinelMaster, "a master set name", 256) && scheme == "unix" {
			t.c.add(t.keyOf("sentinel_master"), "Sentinels are reached over TCP, and redis_url is a unix:// URL: with sentinel_master, redis_url names a Sentinel's host:port")
		}
	}
	if !misplaced["sentinel_addrs"] && t.strs("sentinel_addrs", &cl.SentinelAddrs) {
		checkAddrs(t, "sentinel_addrs", "26379", cl.SentinelAddrs)
		if len(cl.SentinelAddrs) > 0 && cl.SentinelMaster == "" && !masterUnknown {
			t.c.add(t.keyOf("sentinel_addrs"), "set without sentinel_master: name the master set these Sentinels monitor, or remove sentinel_addrs")
		}
	}
	if !misplaced["redis_addrs"] && t.strs("redis_addrs", &cl.RedisAddrs) {
		checkAddrs(t, "redis_addrs", "6379", cl.RedisAddrs)
		switch {
		case len(cl.RedisAddrs) > 0 && cl.SentinelMaster != "":
			t.c.add(t.keyOf("redis_addrs"), "set with sentinel_master: redis_addrs are Redis Cluster nodes, and a Sentinel set is named by redis_url and sentinel_addrs; keep one")
		case len(cl.RedisAddrs) > 0 && scheme == "unix":
			t.c.add(t.keyOf("redis_addrs"), "set with a unix:// redis_url: Redis Cluster nodes are reached over TCP; write redis_url as redis://host:port")
		}
	}
	if str("key_prefix", &cl.KeyPrefix) {
		checkKeyPrefix(t.c, t.keyOf("key_prefix"), cl.KeyPrefix)
	}

	syncOK, timeoutOK := true, true
	if !misplaced["sync_interval"] {
		syncOK = t.durationIn("sync_interval", &cl.SyncInterval)
	}
	if !misplaced["timeout"] {
		timeoutOK = t.durationIn("timeout", &cl.Timeout)
	}
	if redis && syncOK && timeoutOK && cl.Timeout >= cl.SyncInterval {
		t.c.add(t.keyOf(t.writtenOr("timeout", "sync_interval")), "timeout %v is not shorter than sync_interval %v: one store operation must end before the next sync is due; lower timeout or raise sync_interval", cl.Timeout, cl.SyncInterval)
	}

	if !misplaced["trip_quorum"] {
		t.integer("trip_quorum", &cl.TripQuorum)
	}

	if t.str("instance", &cl.Instance) && cl.Instance != "" &&
		checkWord(t.c, t.keyOf("instance"), cl.Instance, "an instance name", MaxInstanceLen) &&
		strings.ContainsFunc(cl.Instance, func(r rune) bool { return r > '~' }) {
		// The store names its connections after it (CLIENT SETNAME), which
		// takes printable ASCII only.
		t.c.add(t.keyOf("instance"), "%q holds a character beyond ASCII: Redis takes printable ASCII in a client name", cl.Instance)
	}
	t.done()
}

// checkRedisURL reports a redis_url that is not one a Redis client can
// dial, and returns its scheme ("" when it does not parse). Messages show
// the URL with its password replaced by "xxxxx".
func checkRedisURL(c *collector, key, raw string) string {
	example := `e.g. "redis://127.0.0.1:6379", "rediss://user:pass@redis.example:6380/0" or "unix:///run/redis/redis.sock"`
	if raw == "" {
		c.add(key, "must not be empty: the Redis server, %s", example)
		return ""
	}
	if !strings.Contains(raw, "://") {
		// Not quoted: it may hold a password.
		c.add(key, "has no scheme: write the server as a URL, %s", example)
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The url.Error around it would repeat the URL, password and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		c.add(key, "not a URL (%v): %s", err, example)
		return ""
	}
	shown := strconv.Quote(u.Redacted())
	switch {
	case u.Scheme == "":
		c.add(key, "has no scheme: write the server as a URL, %s", example)
		return ""
	case !slices.Contains(RedisSchemes(), u.Scheme):
		c.add(key, "%s: scheme %q is not one of %s; %s", shown, u.Scheme, strings.Join(RedisSchemes(), ", "), example)
		return ""
	case u.Opaque != "":
		c.add(key, "%s: write %s://host:port, with two slashes after the scheme", shown, u.Scheme)
		return u.Scheme
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		c.add(key, "%s has a fragment (#...): a '#' in a password must be written %%23", shown)
		return u.Scheme
	}
	q := u.Query()
	for _, name := range slices.Sorted(maps.Keys(q)) {
		vs := q[name]
		if name != "db" {
			c.add(key, "%s: query parameter %q is not accepted: redis_url takes only db (unix:///path?db=N); TLS, Sentinel and timeouts are [cluster] keys", shown, name)
			return u.Scheme
		}
		if n, err := strconv.Atoi(vs[len(vs)-1]); err != nil || n < 0 || len(vs) > 1 {
			c.add(key, "%s: db must be one database number, 0 or more", shown)
			return u.Scheme
		}
	}
	if u.Scheme == "unix" {
		switch {
		case u.Host != "":
			c.add(key, "%s names a host: a unix socket URL is unix:// and an absolute path, e.g. \"unix:///run/redis/redis.sock\" (three slashes)", shown)
		case u.Path == "" || u.Path == "/" || strings.HasSuffix(u.Path, "/"):
			c.add(key, "%s names no socket file: write the socket's absolute path, e.g. \"unix:///run/redis/redis.sock\"", shown)
		}
		return u.Scheme
	}
	if u.Hostname() == "" {
		c.add(key, "%s names no host: %s", shown, example)
		return u.Scheme
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			c.add(key, "%s: port %s is out of range: must be between 1 and 65535", shown, p)
			return u.Scheme
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 || strings.HasPrefix(db, "+") {
			c.add(key, "%s: the path %q is not a database number: write /N (0 or more) after host:port, or nothing", shown, u.Path)
		} else if u.Query().Has("db") {
			c.add(key, "%s: the database is named twice, in the path and by db=: keep one", shown)
		}
	}
	return u.Scheme
}

// checkAddrs reports entries of the list name (sentinel_addrs,
// redis_addrs) that are not host:port, and repeated ones; example is the
// port the messages' examples show.
func checkAddrs(t *table, name, example string, addrs []string) {
	key := t.keyOf(name)
	seen := map[string]int{}
	for i, a := range addrs {
		ek := indexKey(key, i)
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			if ae, ok := errors.AsType[*net.AddrError](err); ok {
				err = errors.New(ae.Err)
			}
			t.c.add(ek, "%q is not host:port (%v): write e.g. \"10.0.0.5:%s\" or \"[fd00::5]:%s\"", a, err, example, example)
			continue
		}
		if host == "" || strings.ContainsFunc(host, func(r rune) bool { return unicode.IsSpace(r) || !strconv.IsPrint(r) }) {
			t.c.add(ek, "%q names no usable host: write e.g. \"10.0.0.5:%s\"", a, example)
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			t.c.add(ek, "%q: port %q must be a number between 1 and 65535", a, port)
			continue
		}
		canon := strings.ToLower(net.JoinHostPort(host, port))
		if j, ok := seen[canon]; ok {
			t.c.add(ek, "%q is already %s (line %d)", a, indexKey(key, j), t.c.pos.line(indexKey(key, j)))
			continue
		}
		seen[canon] = i
	}
}

// checkKeyPrefix reports a key_prefix Redis keys should not start with.
func checkKeyPrefix(c *collector, key, p string) {
	switch {
	case p == "":
		c.add(key, `must not be empty: every instance sharing the store uses the same prefix, e.g. "l4lb:"`)
	case len(p) > MaxKeyPrefixLen:
		c.add(key, "is %d bytes long, more than %d", len(p), MaxKeyPrefixLen)
	case !isPrintable(p):
		c.add(key, "%q holds a control character or invalid UTF-8: a key prefix must be printable", p)
	case strings.ContainsAny(p, "{}"):
		c.add(key, "%q holds '{' or '}': braces mark Redis Cluster hash tags, which the store adds to its keys itself", p)
	}
}

// checkWord reports a name (an instance, a master set, a TLS server name)
// that is longer than maxLen bytes, not printable, or holds a space. It
// returns true when it reported nothing.
func checkWord(c *collector, key, s, what string, maxLen int) bool {
	switch {
	case len(s) > maxLen:
		c.add(key, "is %d bytes long: %s is at most %d", len(s), what, maxLen)
	case !isPrintable(s):
		c.add(key, "%q holds a control character or invalid UTF-8: %s must be printable", s, what)
	case strings.ContainsFunc(s, unicode.IsSpace):
		c.add(key, "%q holds a space: %s is one word", s, what)
	default:
		return true
	}
	return false
}

// isPrintable reports whether s is valid UTF-8 with no control characters.
func isPrintable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) })
}

// checkClusterFiles reports [cluster] files run could not use: a password
// file it cannot read or that is empty, a CA bundle without a PEM
// certificate, a client certificate and key that do not load as a pair.
// With store = "memory" there are none (Parse refuses them).
func checkClusterFiles(c *collector, cl Cluster) {
	if cl.Store != StoreRedis {
		return
	}
	if cl.PasswordFile != "" {
		pw, err := ReadRedisPassword(cl.PasswordFile)
		switch {
		case err != nil:
			c.add("cluster.password_file", "cannot read the Redis password: %v", err)
		case pw == "":
			c.add("cluster.password_file", "%q is empty: write the Redis password into it, or remove password_file", cl.PasswordFile)
		}
	}
	if cl.TLSCAFile != "" {
		checkCAFile(c, "cluster.tls_ca_file", cl.TLSCAFile)
	}
	if cl.TLSCertFile == "" || cl.TLSKeyFile == "" {
		return // Parse requires both or neither
	}
	certBad := unreadable(c, "cluster.tls_cert_file", "the client certificate", cl.TLSCertFile)
	keyBad := unreadable(c, "cluster.tls_key_file", "the client certificate's key", cl.TLSKeyFile)
	if certBad || keyBad {
		return
	}
	if _, err := tls.LoadX509KeyPair(cl.TLSCertFile, cl.TLSKeyFile); err != nil {
		c.add("cluster.tls_cert_file", "cannot load the client certificate with its key (tls_key_file %q): %v", cl.TLSKeyFile, strings.TrimPrefix(err.Error(), "tls: "))
	}
}

// checkCAFile reports a CA bundle at path that cannot be read or holds
// no PEM certificate, on key.
func checkCAFile(c *collector, key, path string) {
	data, err := os.ReadFile(path)
	switch {
	case err != nil:
		c.add(key, "cannot read the CA bundle: %v", err)
	case !x509.NewCertPool().AppendCertsFromPEM(data):
		c.add(key, "%q holds no PEM certificate: name a file of -----BEGIN CERTIFICATE----- blocks", path)
	}
}

// unreadable reports (and returns true for) a file that cannot be read
// or is empty.
func unreadable(c *collector, key, what, path string) bool {
	f, err := os.Open(path)
	if err == nil {
		var buf [1]byte
		_, err = f.Read(buf[:])
		f.Close()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%s is empty", path)
		}
	}
	if err != nil {
		c.add(key, "cannot read %s: %v", what, err)
		return true
	}
	return false
}
