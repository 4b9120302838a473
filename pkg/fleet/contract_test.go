package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker/storetest"
)

// newTestStore is a Store on srv, shut down at the end of the test.
func newTestStore(t *testing.T, srv *testnet.Redis, tweak func(*Config)) *Store {
	t.Helper()
	cfg := Config{RedisURL: srv.URL(), KeyPrefix: testPrefix, SyncInterval: time.Hour, Timeout: 2 * time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	if !s.Up() {
		t.Fatal("store not up against a running redis-server")
	}
	return s
}

// The breaker Store contract, against the fleet's Store on a real
// redis-server: the same suite the MemoryStore passes.
func TestStore_Contract(t *testing.T) {
	srv := testnet.StartRedis(t)
	s := newTestStore(t, srv, nil)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return storetest.Harness{Store: s, Elapse: time.Sleep}
	})
}

// And against the bare Redis layer, which the Store only adds fallback to.
func TestRedisStore_Contract(t *testing.T) {
	srv := testnet.StartRedis(t)
	s := newTestStore(t, srv, nil)
	r := s.remote.Load()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return storetest.Harness{Store: r, Elapse: time.Sleep}
	})
}

// neverJoined is a Store whose Redis was down at its start (and stays
// down), shut down at the end of the test.
func neverJoined(t *testing.T) *Store {
	t.Helper()
	srv := testnet.StartRedis(t)
	srv.Kill()
	s, err := New(Config{RedisURL: srv.URL(), KeyPrefix: testPrefix, SyncInterval: time.Hour, Timeout: 100 * time.Millisecond}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// A Redis that is down at start is no error: the instance decides locally.
func TestStartsApartWhenRedisIsDown(t *testing.T) {
	s := neverJoined(t)
	if s.Up() {
		t.Fatal("up with redis down")
	}
	if _, ok, err := s.Trip(context.Background(), "p/a", 0, time.Second, time.Second); !ok || err != nil {
		t.Fatalf("local trip: %v %v", ok, err)
	}
}
