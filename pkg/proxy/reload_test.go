package proxy

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
	done := make(chan error, 1)
	go func() {
		_, err := l.server.Reload(fronts, 100)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.server.Shutdown(ctx)
	<-done
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
	deadline := time.Now().Add(20 * time.Second)
	for next.Backends()[0].HealthUp() {
		if time.Now().After(deadline) {
			t.Fatal("setup: the new pool never saw the backend go down")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sessionBackend.Usable() {
		t.Fatal("the backend is down (the new pool says so), but the backend a UDP session of the old pool holds still reads usable: the session stays pinned to a dead backend")
	}
}
