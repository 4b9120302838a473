package fleet

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// apartStores are an instance's Store reaching Redis through a proxy the test
// cuts, and a second instance's, connected directly.
func apartStores(t *testing.T, opts Options) (h *fleetHarness, p *cutProxy, a, b *Store) {
	t.Helper()
	h = newFleet(t)
	p = startProxy(t, h.srv.Addr)
	a = h.store(func(c *Config) {
		c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, time.Hour
	}, opts)
	b = h.store(nil, Options{})
	return h, p, a, b
}

// cutOff cuts a's proxy and waits until a decides locally.
func cutOff(t *testing.T, p *cutProxy, a *Store, key string) {
	t.Helper()
	p.Cut()
	testnet.Eventually(t, "A decides locally", func() bool {
		_, _ = a.Read(context.Background(), key)
		return !a.Up()
	})
}

// A probe that ends while its instance is apart cannot release the lock it
// took in Redis before the outage; the release is owed, and made before
// Redis decides for the instance again. Otherwise the lock outlives the
// probe in Redis, and nobody probes the backend until it expires.
func TestProbeLockReleasedApartIsReleasedInRedisOnReturn(t *testing.T) {
	_, p, a, b := apartStores(t, Options{})
	const key = "web/10.0.8.1:80"
	ctx := context.Background()
	if got, err := a.AcquireProbe(ctx, key, "A", time.Hour); err != nil || !got {
		t.Fatalf("A takes the probe lock in redis: %v %v", got, err)
	}
	cutOff(t, p, a, key)
	if err := a.ReleaseProbe(ctx, key, "A"); err != nil {
		t.Fatalf("A releases apart: %v", err)
	}
	p.Heal()
	testnet.Eventually(t, "A rejoins", a.Up)
	if got, err := b.AcquireProbe(ctx, key, "B", time.Hour); err != nil || !got {
		t.Fatalf("B asks for the probe lock after A's probe ended and A rejoined: %v %v; A's lock is still held in redis", got, err)
	}
}

// A probe begun while its instance is apart still runs when Redis answers
// again: its lock must reach Redis before the instance rejoins, or another
// instance takes the lock in Redis and probes the same backend at once.
func TestProbeLockTakenApartHoldsInRedisAfterReturn(t *testing.T) {
	_, p, a, b := apartStores(t, Options{})
	const key = "web/10.0.8.2:80"
	ctx := context.Background()
	cutOff(t, p, a, key)
	if got, err := a.AcquireProbe(ctx, key, "A", time.Hour); err != nil || !got {
		t.Fatalf("A takes its local probe lock apart: %v %v", got, err)
	}
	if a.Up() {
		t.Fatal("A rejoined through a cut proxy")
	}
	p.Heal()
	testnet.Eventually(t, "A rejoins", a.Up)
	if got, err := b.AcquireProbe(ctx, key, "B", time.Hour); err != nil || got {
		t.Fatalf("B asks for the probe lock while A's probe still runs: %v %v; want refused (two probes of one backend at once)", got, err)
	}
	if err := a.ReleaseProbe(ctx, key, "A"); err != nil {
		t.Fatalf("A's probe ends: %v", err)
	}
	if got, err := b.AcquireProbe(ctx, key, "B", time.Hour); err != nil || !got {
		t.Fatalf("B asks for the probe lock after A's probe ended: %v %v", got, err)
	}
}

// readRacing runs s.Read(key) and, once Redis has answered the read but
// before the answer reaches the local copy, runs during. It returns what
// the read answered.
type readRacer struct {
	store  atomic.Pointer[Store]
	armed  atomic.Bool
	during func()
}

func (r *readRacer) observe(op string, _ time.Duration, err error) {
	if op == "read" && err == nil && r.armed.CompareAndSwap(true, false) {
		r.during()
	}
}

// A Read that Redis answered before a Disable must not put its answer in
// the local copy after the Disable did: the copy would say enabled, and an
// outage right after would have the instance send clients to a backend an
// operator disabled (rule 5).
func TestReadRacingDisableDoesNotUndoItInTheLocalCopy(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.8.3:80"
	ctx := context.Background()
	r := &readRacer{}
	var derr error
	r.during = func() { derr = r.store.Load().Disable(ctx, key) }
	s := h.store(nil, Options{Observe: r.observe})
	r.store.Store(s)
	if _, err := s.Read(ctx, key); err != nil {
		t.Fatal(err)
	}
	r.armed.Store(true)
	st, err := s.Read(ctx, key)
	if err != nil || derr != nil || r.armed.Load() {
		t.Fatalf("read %+v %v, disable %v, raced %v", st, err, derr, !r.armed.Load())
	}
	if st.Disabled {
		t.Fatalf("the read answered %+v: it was to be answered before the disable", st)
	}
	if local, _ := s.local.Read(ctx, key); !local.Disabled {
		t.Fatalf("local copy %+v after a disable redis accepted: the read from before it went back to enabled", local)
	}
}

// The same for an Enable: the local copy must not go back to disabled.
func TestReadRacingEnableDoesNotUndoItInTheLocalCopy(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.8.4:80"
	ctx := context.Background()
	r := &readRacer{}
	var eerr error
	r.during = func() { eerr = r.store.Load().Enable(ctx, key) }
	s := h.store(nil, Options{Observe: r.observe})
	r.store.Store(s)
	if err := s.Disable(ctx, key); err != nil {
		t.Fatal(err)
	}
	r.armed.Store(true)
	st, err := s.Read(ctx, key)
	if err != nil || eerr != nil || r.armed.Load() {
		t.Fatalf("read %+v %v, enable %v, raced %v", st, err, eerr, !r.armed.Load())
	}
	if !st.Disabled {
		t.Fatalf("the read answered %+v: it was to be answered before the enable", st)
	}
	if local, _ := s.local.Read(ctx, key); local.Disabled {
		t.Fatalf("local copy %+v after an enable redis accepted: the read from before it went back to disabled", local)
	}
}

// Two reads of one key: the one begun later (which saw another instance's
// disable) must not be undone by the one begun earlier and answered
// before it.
func TestEarlierReadDoesNotUndoALaterOneInTheLocalCopy(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.8.5:80"
	ctx := context.Background()
	r := &readRacer{}
	b := h.store(nil, Options{})
	r.during = func() {
		if err := b.Disable(ctx, key); err != nil {
			t.Error(err)
			return
		}
		s := r.store.Load()
		testnet.Eventually(t, "A reads B's disable", func() bool {
			st, err := s.Read(ctx, key)
			return err == nil && st.Disabled
		})
	}
	s := h.store(nil, Options{Observe: r.observe})
	r.store.Store(s)
	if _, err := s.Read(ctx, key); err != nil {
		t.Fatal(err)
	}
	r.armed.Store(true)
	st, err := s.Read(ctx, key)
	if err != nil || st.Disabled || r.armed.Load() {
		t.Fatalf("the earlier read answered %+v %v (raced %v); want enabled, from before B's disable", st, err, !r.armed.Load())
	}
	if local, _ := s.local.Read(ctx, key); !local.Disabled {
		t.Fatalf("local copy %+v: the earlier read undid the later one's disable", local)
	}
}

// Redis answering with an error about one key (a key of the wrong type, a
// script that fails on what a key holds, a reply that does not decode) is
// no outage: the operation fails, the instance stays with the fleet, and
// other keys are Redis's to decide as before. Going apart over it would
// have the instance decide every key alone, and come back and leave again
// at every touch of the bad key.
func TestRedisErrorAboutAKeyIsNoOutage(t *testing.T) {
	ks := keyspace{prefix: DefaultKeyPrefix}
	for _, tc := range []struct {
		name  string
		setup [][]string
		op    func(ctx context.Context, s *Store, key string) error
		want  string
	}{
		{"read of a generation of the wrong type", [][]string{{"HSET", ks.key("K", fieldGen), "f", "v"}},
			func(ctx context.Context, s *Store, key string) error { _, err := s.Read(ctx, key); return err }, "WRONGTYPE"},
		{"trip script failing on an open entry of the wrong type", [][]string{{"HSET", ks.key("K", fieldOpen), "f", "v"}},
			func(ctx context.Context, s *Store, key string) error {
				_, _, err := s.Trip(ctx, key, 0, time.Minute, time.Minute)
				return err
			}, "WRONGTYPE"},
		{"trip on a generation that is no number", [][]string{{"SET", ks.key("K", fieldGen), "abc"}},
			func(ctx context.Context, s *Store, key string) error {
				_, _, err := s.Trip(ctx, key, 0, time.Minute, time.Minute)
				return err
			}, "state script answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFleet(t)
			ops := newOpCounter()
			s := h.store(func(c *Config) { c.Timeout = outageTimeout }, Options{Observe: ops.observe})
			ctx := context.Background()
			for _, cmd := range tc.setup {
				if _, err := h.srv.Do(cmd...); err != nil {
					t.Fatalf("%v: %v", cmd, err)
				}
			}
			if err := tc.op(ctx, s, "K"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("answered %v; want an error saying %q", err, tc.want)
			}
			if !s.Up() {
				t.Fatal("the instance went apart over an error about one key")
			}
			st, done, err := s.Trip(ctx, "other", 0, time.Minute, time.Minute)
			if err != nil || !done || !s.Up() {
				t.Fatalf("another key's trip: %+v %v %v, up %v", st, done, err, s.Up())
			}
			if raw := h.raw("other"); !raw.Open {
				t.Fatalf("redis holds %+v for the other key: its trip was not redis's", raw)
			}
		})
	}
}

// A Redis that lost its scripts (SCRIPT FLUSH, a restart, a failover) has
// them loaded again: NOSCRIPT is neither an error nor an outage.
func TestNoScriptLoadsTheScriptAgain(t *testing.T) {
	h := newFleet(t)
	ops := newOpCounter()
	s := h.store(nil, Options{Observe: ops.observe})
	ctx := context.Background()
	const key = "web/10.0.8.6:80"
	if _, _, err := s.Trip(ctx, key, 0, time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	st, done, err := s.Close(ctx, key, 1)
	if err != nil || !done || !s.Up() {
		t.Fatalf("close after SCRIPT FLUSH: %+v %v %v, up %v", st, done, err, s.Up())
	}
	if raw := h.raw(key); raw.Open || raw.Gen != 2 {
		t.Fatalf("redis holds %+v; want closed at generation 2", raw)
	}
}

// A Redis out of memory refuses every write: the fleet cannot decide
// through it, so the instance decides alone, as while Redis is out of
// reach, and merges back once Redis takes writes again. (Treating it as a
// plain error would leave no breaker able to trip anywhere.)
func TestOutOfMemoryIsAnOutage(t *testing.T) {
	h := newFleet(t)
	s := h.store(func(c *Config) { c.Timeout = outageTimeout }, Options{})
	ctx := context.Background()
	const key = "web/10.0.8.7:80"
	for _, cmd := range [][]string{{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"CONFIG", "SET", "maxmemory", "1"}} {
		if _, err := h.srv.Do(cmd...); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	st, done, err := s.Trip(ctx, key, 0, time.Minute, time.Minute)
	if err != nil || !done || s.Up() {
		t.Fatalf("trip on a redis out of memory: %+v %v %v, up %v; want tripped locally", st, done, err, s.Up())
	}
	if _, err := h.srv.Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the instance rejoins", s.Up)
	if raw := h.raw(key); !raw.Open {
		t.Fatalf("redis holds %+v: the local trip was not merged back", raw)
	}
}

// A client key without its certificate (or a certificate without its key)
// is refused with the key named, not taken as "no TLS".
func TestTLSKeyPairHalfIsRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{RedisURL: "redis://127.0.0.1:6379", TLSKeyFile: "/etc/l4lb/redis.key"}, "tls_key_file"},
		{Config{RedisURL: "rediss://127.0.0.1:6379", TLSKeyFile: "/etc/l4lb/redis.key"}, "tls_key_file"},
		{Config{RedisURL: "redis://127.0.0.1:6379", TLSCertFile: "/etc/l4lb/redis.pem"}, "tls_cert_file"},
	} {
		_, err := tc.cfg.clientOption()
		if err == nil || !strings.Contains(err.Error(), tc.want+" is set without") {
			t.Errorf("%+v: %v; want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// A key Redis refuses to merge (it holds what no instance writes) does not
// keep the instance apart: the other keys are merged, and the instance
// rejoins.
func TestUnmergeableKeyDoesNotKeepTheInstanceApart(t *testing.T) {
	h, p, a, _ := apartStores(t, Options{})
	ctx := context.Background()
	const bad, good = "web/10.0.8.8:80", "web/10.0.8.9:80"
	cutOff(t, p, a, good)
	for _, key := range []string{bad, good} {
		if _, done, err := a.Trip(ctx, key, 0, time.Minute, time.Minute); err != nil || !done || a.Up() {
			t.Fatalf("%s: local trip %v %v, up %v", key, done, err, a.Up())
		}
	}
	if _, err := h.srv.Do("HSET", keyspace{prefix: DefaultKeyPrefix}.key(bad, fieldGen), "f", "v"); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	testnet.Eventually(t, "A rejoins", a.Up)
	if raw := h.raw(good); !raw.Open {
		t.Fatalf("redis holds %+v for %s: its local trip was not merged", raw, good)
	}
}
