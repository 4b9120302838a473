package main

import (
	"context"
	"encoding/json"
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

// Operators' changes made at the same time (a script draining several
// backends in parallel through the API) all reach the state file: the
// file written last holds every change made before it, never an older
// picture of the pools that lost the race to the lock.
func TestStateFileKeepsEveryConcurrentChange(t *testing.T) {
	const n = 24
	state := filepath.Join(t.TempDir(), "state.json")
	var b strings.Builder
	fmt.Fprintf(&b, "[global]\nstate_file = %q\n[admin]\nlisten = \"\"\n", state)
	fmt.Fprintf(&b, "[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n[pool.p]\n[pool.p.health]\nenabled = false\n", testnet.FreeAddr(t))
	for i := range n {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = \"192.0.2.%d:80\"\n", i+1)
	}
	in, _ := startFile(t, b.String())
	p := in.livePools()[0]

	for round := range 5 {
		var wg sync.WaitGroup
		for _, be := range p.Backends() {
			wg.Go(func() {
				if round%2 == 0 {
					p.Drain(context.Background(), be, time.Hour)
				} else {
					p.Enable(context.Background(), be)
				}
			})
		}
		wg.Wait()
		data, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		var doc stateDoc
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		drained := 0
		for _, r := range doc.Backends["p"] {
			if r.Drained {
				drained++
			}
		}
		want := 0
		if round%2 == 0 {
			want = n
		}
		if drained != want {
			t.Fatalf("round %d: every backend is %s, but the state file says %d of %d are drained: a restart would restore an older state",
				round, map[bool]string{true: "drained", false: "enabled"}[want == n], drained, n)
		}
	}
}

// A key a reload does not apply keeps its running value until an upgrade
// or a restart, and every reload of a file that still changes it says so,
// not only the first: the warning compares the file with what runs, not
// with the file the previous reload read. A file that returns to the
// running value warns of nothing.
func TestReloadWarnsWhileTheFileDiffersFromWhatRuns(t *testing.T) {
	b1 := testnet.StartBackend(t, "b1", "")
	front := testnet.FreeAddr(t)
	render := func(pipeSize, backlog int) string {
		return fmt.Sprintf("[global]\npipe_size = %d\n[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\nbacklog = %d\npool = \"p\"\n[pool.p]\n[[pool.p.backend]]\naddr = %q\n",
			pipeSize, front, backlog, b1.Addr)
	}
	in, path := startFile(t, render(1<<20, 0))
	reload := func(text string) []string {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		res, errs := in.reload()
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return res.Warnings
	}
	has := func(ws []string, key string) bool {
		for _, w := range ws {
			if strings.HasPrefix(w, key+" changed") {
				return true
			}
		}
		return false
	}
	for i := range 2 {
		ws := reload(render(65536, 64))
		if !has(ws, "[global] pipe_size") || !has(ws, `listener "front" backlog`) {
			t.Fatalf("reload %d of a file whose pipe_size and backlog differ from the running ones: warnings %q, want both named", i+1, ws)
		}
	}
	if ws := reload(render(1<<20, 0)); len(ws) != 0 {
		t.Fatalf("a file back at the running values warns %q", ws)
	}
}

// A shutdown that comes while an API reload is applying (its listeners
// already swapped, its pools not yet running) still stops every pool the
// reload started: l4lb exits instead of waiting forever on health checks
// and breakers nothing will stop.
func TestShutdownDuringReloadStopsTheNewPools(t *testing.T) {
	testnet.CheckLeaks(t)
	front, extra := testnet.FreeAddr(t), testnet.FreeAddr(t)
	for extra == front {
		extra = testnet.FreeAddr(t)
	}
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
	testnet.Eventually(t, "the reload to swap the listeners", func() bool {
		c, err := net.DialTimeout("tcp", extra, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
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
	<-reloaded
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
	// waits for the reload; either way the reload goes on.
	select {
	case err := <-drained:
		drained <- err
	case <-time.After(2 * time.Second):
	}
	close(gate.release)
	if errs := <-reloaded; len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := <-drained; err != nil {
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
