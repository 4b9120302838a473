package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// Redis answering with an error about one key (a key of the wrong type, a
// script that fails on what a key holds, a reply that does not decode) is
// no outage: the operation fails, the instance stays with the fleet, and
// other keys are Redis's to decide as before. Going apart over it would
// have the instance decide every key alone, and come back and leave again
// at every touch of the bad key.
func TestRedisErrorAboutAKeyIsNoOutage(t *testing.T) {
	ks := keyspace{prefix: testPrefix}
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
	s := h.store(func(c *Config) { c.Timeout = outageTimeout }, Options{Clock: clock.NewFake(time.Now())})
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
	rejoined(t, s, "the instance rejoins")
	if raw := h.raw(key); !raw.Open {
		t.Fatalf("redis holds %+v: the local trip was not merged back", raw)
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
	if _, err := h.srv.Do("HSET", keyspace{prefix: testPrefix}.key(bad, fieldGen), "f", "v"); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	rejoined(t, a, "A rejoins")
	if raw := h.raw(good); !raw.Open {
		t.Fatalf("redis holds %+v for %s: its local trip was not merged", raw, good)
	}
}
