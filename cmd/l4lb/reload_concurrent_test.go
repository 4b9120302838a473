package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
)

// A shutdown that comes while an API reload is applying (its listeners
// already swapped, its pools not yet running) still stops every pool the
// reload started: l4lb exits instead of waiting forever on health checks
// and breakers nothing will stop.
func TestShutdownDuringReloadStopsTheNewPools(t *testing.T) {
	testnet.CheckLeaks(t)
	front, extra := testnet.FreeAddr(t), testnet.FreeAddr(t)
	// Many backends: handing the old pool over to the new one takes a
	// while, which leaves time to shut down in between.
	render := func(withExtra bool) string {
		var b strings.Builder
		fmt.Fprintf(&b, "[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", front)
		if withExtra {
			fmt.Fprintf(&b, "[[listener]]\nname = \"extra\"\nbind = %q\npool = \"p\"\n", extra)
		}
		b.WriteString("[pool.p]\n[pool.p.health]\nenabled = false\n")
		for i := range 6000 {
			fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = \"198.18.%d.%d:80\"\n", i/250, i%250+1)
		}
		return b.String()
	}
	path := filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(render(false)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := start(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	in.useFile(path)
	if err := os.WriteFile(path, []byte(render(true)), 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		in.reload()
	}()
	// The extra listener accepts once the server swapped its listeners.
	// Reading and checking 6,000 backends took over 20 s once with every
	// other package's tests beside it: this wait is as long as the
	// shutdown's below.
	if !testnet.WaitUntil(60*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", extra, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}) {
		t.Fatal("timed out waiting: the reload to swap the listeners")
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		in.shutdown(ctx)
	}()
	select {
	case <-stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("shutdown never returned: the pools the reload started were never stopped")
	}
	receive(t, "the reload interrupted by the shutdown to return", reloaded)
}

// receive is what ch gives, or the test fails after a generous deadline
// (what is awaited names it) instead of hanging until go test's timeout.
// Nothing is asserted on how soon it comes.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// gatedStore is the breaker store, with reads of one key held until
// released: a reload that builds a breaker for that key waits there, with
// its new pools built up to it and not yet serving.
type gatedStore struct {
	breaker.Store
	key     string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedStore) Read(ctx context.Context, key string) (breaker.State, error) {
	if key == g.key {
		g.once.Do(func() { close(g.entered) })
		<-g.release
		ctx = context.WithoutCancel(ctx) // the wait is the test's, not the store's
	}
	return g.Store.Read(ctx, key)
}

// An operator's drain (or enable, or weight) that comes while a reload
// builds the pools that replace the running ones is not lost with the
// pools it was made on: the backend the reload carries on is drained.
func TestDrainDuringReloadReachesTheNewPool(t *testing.T) {
	b1, b2 := testnet.StartBackend(t, "b1", ""), testnet.StartBackend(t, "b2", "")
	front, adm := testnet.FreeAddr(t), testnet.FreeAddr(t)
	for adm == front {
		adm = testnet.FreeAddr(t)
	}
	render := func(backends ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "[admin]\nlisten = %q\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n[pool.p]\n[pool.p.health]\nenabled = false\n", adm, front)
		for _, a := range backends {
			fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
		}
		return b.String()
	}
	in, path := startFile(t, render(b1.Addr))
	// The reload adds b2 after b1: it waits in b2's breaker, b1's
	// successor already built from b1 as it was then.
	gate := &gatedStore{Store: in.store.store, key: "p/" + b2.Addr, entered: make(chan struct{}), release: make(chan struct{})}
	in.store.store = gate
	if err := os.WriteFile(path, []byte(render(b1.Addr, b2.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan []string, 1)
	go func() {
		_, errs := in.reload()
		reloaded <- errs
	}()
	select {
	case <-gate.entered:
	case <-time.After(60 * time.Second):
		close(gate.release)
		t.Fatal("the reload never built b2's breaker")
	}
	drained := make(chan error, 1)
	go func() {
		resp, err := http.Post("http://"+adm+"/api/v1/pools/p/backends/"+b1.Addr+"/drain?timeout=1h", "", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				err = fmt.Errorf("drain: %s", resp.Status)
			}
		}
		drained <- err
	}()
	// The drain either goes through now (on the pools being replaced) or
	// waits for the reload; either way the reload goes on. The pause only
	// gives the first case its chance: both are right, and a loaded
	// machine that takes the second one fails nothing.
	select {
	case err := <-drained:
		drained <- err
	case <-time.After(2 * time.Second):
	}
	close(gate.release)
	if errs := receive(t, "the reload to finish once released", reloaded); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := receive(t, "the API's answer to the drain", drained); err != nil {
		t.Fatal(err)
	}
	b, ok := in.livePools()[0].Backend(b1.Addr)
	if !ok {
		t.Fatal("b1 is gone")
	}
	if !b.Draining() {
		t.Fatal("the operator drained b1 (202) during a reload, and the pool serving after it does not drain b1: the drain was lost with the old pool")
	}
}
