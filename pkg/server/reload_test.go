package server

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A reload (POST /api/v1/reload: the admin endpoint stays up through the
// drain) may come while the server shuts down. Reload reads s.closed
// under reloadMu; Shutdown writes it under no lock at all.
func TestReloadDuringShutdown(t *testing.T) {
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, ""), 0)
	fronts := []Frontend{{Name: "front", Bind: l.addr, Pool: l.pools["p"]}}
	reloaded := make(chan error, 1)
	go func() {
		_, err := l.server.Reload(fronts, ConnCap{MaxConnections: 100})
		reloaded <- err
	}()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- l.server.Shutdown(ctx)
	}()
	// Each wait is bounded: a reload and a shutdown that deadlock on each
	// other fail the test, naming which of them never returned, rather
	// than hang it until go test's own timeout. The deadline is generous
	// (neither has a client to wait for), and nothing is asserted on how
	// soon they return.
	stuck := time.After(30 * time.Second)
	for _, w := range []struct {
		what string
		ch   chan error
	}{{"the shutdown", shut}, {"the reload begun during the shutdown", reloaded}} {
		select {
		case <-w.ch:
			// Either may fail (the reload may come after the shutdown,
			// and is refused then): the race detector judges this test.
		case <-stuck:
			t.Fatalf("%s never returned", w.what)
		}
	}
}

// A UDP session keeps the pool it was accepted with, and moves off its
// backend when that backend leaves rotation (udpsock.go: s.backend.Usable()
// on the session's pool). A reload stops the old pool's checks, so a
// session begun before the reload reads its backend's health as it was at
// the reload: the backend goes down, the new pool knows, the session's
// backend says usable forever.
func TestOldPoolBackendFollowsItsSuccessor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	text := fmt.Sprintf("[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nprotocol = \"udp\"\nbind = \"127.0.0.1:1\"\npool = \"p\"\n"+
		"[pool.p]\n[pool.p.health]\ninterval = \"50ms\"\ntimeout = \"40ms\"\nfall = 1\nrise = 1\n[[pool.p.backend]]\naddr = %q\n", ln.Addr().String())
	cfg, err := config.Parse("test.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	store := breaker.NewMemoryStore(nil)
	old, err := pool.New(cfg.Pools["p"], pool.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctxOld, stopOld := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { old.Run(ctxOld) })
	next, err := pool.New(cfg.Pools["p"], pool.Deps{Store: store, Previous: old})
	if err != nil {
		t.Fatal(err)
	}
	ctxNew, stopNew := context.WithCancel(context.Background())
	defer func() { stopNew(); stopOld(); wg.Wait() }()
	wg.Go(func() { next.Run(ctxNew) })
	old.HandOver(next) // as cmd/l4lb's reload does once the new pools serve
	stopOld()          // and runPools then

	sessionBackend := old.Backends()[0] // what a session begun before the reload holds
	if !sessionBackend.Usable() || !next.Backends()[0].Usable() {
		t.Fatal("setup: the backend should be up")
	}
	ln.Close() // the backend goes down after the reload
	testnet.Eventually(t, "setup: the new pool to see the backend go down", func() bool { return !next.Backends()[0].HealthUp() })
	if sessionBackend.Usable() {
		t.Fatal("the backend is down (the new pool says so), but the backend a UDP session of the old pool holds still reads usable: the session stays pinned to a dead backend")
	}
}
