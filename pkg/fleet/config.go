package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Config is the [cluster] section as the Store needs it.
type Config struct {
	// RedisURL is redis://[user:pass@]host:port[/db], rediss:// for TLS,
	// or unix:///path.
	RedisURL string
	// PasswordFile, when set, holds the password (one trailing newline
	// trimmed); it wins over the URL's, so the secret need not sit in the
	// configuration file.
	PasswordFile string
	// TLS: a CA bundle to verify the server, a client certificate and
	// key (both or neither), and a name to verify instead of the URL's
	// host. Any of them turns TLS on.
	TLSCAFile, TLSCertFile, TLSKeyFile, TLSServerName string
	// SentinelMaster, when set, makes RedisURL's host and SentinelAddrs
	// Sentinels, asked for the master of this set (and again on failover).
	SentinelMaster string
	SentinelAddrs  []string
	// RedisAddrs are more nodes of a Redis Cluster (host:port), tried
	// with RedisURL's host to learn the cluster's layout: any one that
	// answers is enough, so an instance starts while some are down. The
	// client finds a cluster by itself, from RedisURL's node alone too.
	RedisAddrs []string
	// KeyPrefix starts every key the fleet writes. KeyPrefix, SyncInterval
	// and Timeout are required: New refuses a Config without them.
	KeyPrefix string
	// SyncInterval is how often the Store checks Redis (the fleet's
	// marker: Redis's health and whether it lost its data) while it
	// answers, and at most how long it waits between tries while it does
	// not. Cached reads are kept until the server invalidates them; their
	// backstop is cacheBackstop, not this.
	SyncInterval time.Duration
	// Timeout bounds one store operation; past it the instance decides
	// locally until the store answers again.
	Timeout time.Duration
	// Instance names this instance to Redis (CLIENT SETNAME) and in logs,
	// and is its vote towards TripQuorum unless Voter is set.
	Instance string
	// Voter is the name this instance's votes towards TripQuorum count
	// under: it must stay the same across a restart and an upgrade of the
	// instance, so that its vote from before and its vote from after,
	// within one window, count once and not as two instances'. "": Instance.
	Voter string
	// TripQuorum is how many instances must trip a backend within its
	// failure window to open its breaker for the fleet (scripts.go,
	// voteScript); below it an instance's breaker opens for itself alone.
	// 0 or 1: every trip opens it for the fleet.
	TripQuorum int
}

// validate refuses a Config without a key prefix, a sync interval or a
// timeout: Config has no defaults of its own (pkg/config's fill in what
// the file leaves out).
func (c Config) validate() error {
	var errs []error
	if c.KeyPrefix == "" {
		errs = append(errs, errors.New("cluster: key_prefix is empty"))
	}
	if c.SyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("cluster: sync_interval %v is not above 0", c.SyncInterval))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("cluster: timeout %v is not above 0", c.Timeout))
	}
	return errors.Join(errs...)
}

// clientOption builds rueidis' options: the URL, then the file-held
// secrets and TLS material, then Sentinel.
func (c Config) clientOption() (rueidis.ClientOption, error) {
	if c.RedisURL == "" {
		return rueidis.ClientOption{}, errors.New("cluster: redis_url is empty")
	}
	opt, err := rueidis.ParseURL(c.RedisURL)
	if err != nil {
		return opt, fmt.Errorf("cluster: redis_url: %w", err)
	}
	if c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return opt, fmt.Errorf("cluster: password_file: %w", err)
		}
		// The same trim as config.ReadRedisPassword, which check uses.
		pw, ok := strings.CutSuffix(string(b), "\r\n")
		if !ok {
			pw = strings.TrimSuffix(pw, "\n")
		}
		opt.Password = pw
	}
	// The key pair is both files or neither: a key alone would otherwise
	// be dropped without a word, and the client connect without TLS.
	switch {
	case c.TLSKeyFile != "" && c.TLSCertFile == "":
		return opt, errors.New("cluster: tls_key_file is set without tls_cert_file: a private key needs its client certificate")
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		return opt, errors.New("cluster: tls_cert_file is set without tls_key_file: a client certificate needs its private key")
	}
	if c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSServerName != "" {
		if opt.TLSConfig == nil {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			if len(opt.InitAddress) > 0 {
				if host, _, err := net.SplitHostPort(opt.InitAddress[0]); err == nil {
					opt.TLSConfig.ServerName = host
				}
			}
		}
		if c.TLSServerName != "" {
			opt.TLSConfig.ServerName = c.TLSServerName
		}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return opt, fmt.Errorf("cluster: tls_ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return opt, fmt.Errorf("cluster: tls_ca_file %s: no PEM certificate in it", c.TLSCAFile)
			}
			opt.TLSConfig.RootCAs = pool
		}
		if c.TLSCertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
			if err != nil {
				return opt, fmt.Errorf("cluster: tls_cert_file/tls_key_file: %w", err)
			}
			opt.TLSConfig.Certificates = []tls.Certificate{cert}
		}
	}
	if c.SentinelMaster != "" {
		opt.Sentinel.MasterSet = c.SentinelMaster
		opt.InitAddress = append(opt.InitAddress, c.SentinelAddrs...)
		opt.Sentinel.TLSConfig = opt.TLSConfig
		opt.Sentinel.Dialer.Timeout = max(c.Timeout, time.Second)
		// A missed +switch-master would bind the client to a demoted
		// master until restart: reconcile with the Sentinels too.
		opt.Sentinel.TopologyRefreshInterval = max(c.SyncInterval, time.Second)
	}
	if len(c.RedisAddrs) > 0 {
		opt.InitAddress = append(opt.InitAddress, c.RedisAddrs...)
	}
	// A cluster's layout is re-read at every MOVED and lost node; the
	// timed scan finds a failover the client has sent nothing through.
	opt.ClusterOption.ShardsRefreshInterval = max(c.SyncInterval, time.Second)
	if c.Instance != "" {
		opt.ClientName = "l4lb:" + c.Instance
	}
	// A dial or a stuck connection must be noticed in about the time an
	// operation may take, not the kernel's minutes.
	opt.Dialer.Timeout = max(c.Timeout, time.Second)
	opt.ConnWriteTimeout = max(2*c.Timeout, time.Second)
	// Breaker state is a few keys per backend; 128 MiB per connection
	// (the default) would only be address space.
	opt.CacheSizeEachConn = 4 << 20
	// Broadcast tracking on the prefix: the server tells this client of
	// every write to a fleet key, whether or not it has read the key,
	// and tracks nothing per key or per read. A cached read then stays
	// good until that message (or a reconnect, which drops the cache) and
	// needs no server round trip to be tracked again: the idle fleet's
	// load does not grow with instances × backends (docs/fleet.md,
	// "Capacity").
	opt.ClientTrackingOptions = []string{"PREFIX", c.KeyPrefix, "BCAST"}
	// One pipelined connection per server. Broadcast tracking is per
	// connection, so each one the client opens is told of every write
	// again: with rueidis's default (2^log2(GOMAXPROCS), capped at 4, each
	// dialed when a key first hashes to it) one write reached a watcher
	// once or twice depending on which keys the instance had touched
	// (TestProbeLockBurstLeavesNoTrackedConnections, on a loaded machine).
	// The store's few keys per backend need no second pipe: rueidis
	// pipelines concurrent commands on the one (a negative value is its
	// "one connection").
	opt.PipelineMultiplex = -1
	return opt, nil
}
