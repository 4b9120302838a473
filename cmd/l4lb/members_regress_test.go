package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/discovery"
	"github.com/l4lb/l4lb/pkg/membership"
)

func membersTestConfig(fronts map[string]string, pools []string, backend string) string {
	var b strings.Builder
	b.WriteString("[admin]\nlisten = \"\"\n")
	for name, bind := range fronts {
		pool := "p"
		if name == "fq" {
			pool = "q"
		}
		fmt.Fprintf(&b, "[[listener]]\nname = %q\nbind = %q\npool = %q\n", name, bind, pool)
	}
	for _, p := range pools {
		fmt.Fprintf(&b, "[pool.%s]\n[pool.%s.health]\nenabled = false\n[[pool.%s.backend]]\naddr = %q\n", p, p, p, backend)
	}
	return b.String()
}

func poolAddrs(in *instance, name string) []string {
	var out []string
	for _, p := range in.livePools() {
		if p.Name == name {
			for _, b := range p.Backends() {
				out = append(out, b.Addr+"/"+b.Source())
			}
		}
	}
	return out
}

// a reload that fails after Settle loses the API additions.
func TestFailedReloadKeepsAPIBackends(t *testing.T) {
	back := testnet.StartBackend(t, "b", "")
	fp, fq := testnet.FreeAddr(t), testnet.FreeAddr(t)
	in, path := startFile(t, membersTestConfig(map[string]string{"fp": fp, "fq": fq}, []string{"p", "q"}, back.Addr))
	m := apiMembers{in}
	if err := m.AddBackend(context.Background(), "q", admin.NewBackend{Addr: "127.0.0.1:9", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	t.Logf("q before: %v", poolAddrs(in, "q"))
	// A file that drops q and adds a listener on a busy address: serve fails.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := os.WriteFile(path, []byte(membersTestConfig(map[string]string{"fp": fp, "fx": busy.Addr().String()}, []string{"p"}, back.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs := in.reload(); len(errs) == 0 {
		t.Fatal("the reload succeeded")
	} else {
		t.Logf("reload failed as expected: %v", errs)
	}
	t.Logf("members after failed reload: %v; q served: %v", in.members.AddedBackends(), poolAddrs(in, "q"))
	// Any membership change now rebuilds from the old file and the members.
	if err := m.AddBackend(context.Background(), "p", admin.NewBackend{Addr: "127.0.0.1:10", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	t.Logf("q after an unrelated add to p: %v", poolAddrs(in, "q"))
	if got := poolAddrs(in, "q"); len(got) != 2 {
		t.Fatalf("pool q lost its API backend after a failed reload: %v", got)
	}
}

// a remove the fleet store refuses leaves the backend draining here.
func TestARemoveTheFleetRefusesLeavesTheBackendServing(t *testing.T) {
	srv := testnet.StartRedis(t)
	back := testnet.StartBackend(t, "b", "")
	added := testnet.StartBackend(t, "added", "")
	fp := testnet.FreeAddr(t)
	text := fmt.Sprintf("[cluster]\nstore = \"redis\"\nredis_url = %q\ninstance = \"r1\"\ntimeout = \"200ms\"\nsync_interval = \"500ms\"\n", srv.URL()) +
		membersTestConfig(map[string]string{"fp": fp}, []string{"p"}, back.Addr)
	in, _ := startFile(t, text)
	m := apiMembers{in}
	var err error
	testnet.Eventually(t, "the add to be taken", func() bool {
		err = m.AddBackend(context.Background(), "p", admin.NewBackend{Addr: added.Addr, Weight: 1})
		return err == nil
	})
	// A long-lived client on the added backend.
	var held net.Conn
	testnet.Eventually(t, "a client on the added backend", func() bool {
		c, err := net.Dial("tcp", fp)
		if err != nil {
			return false
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		if strings.HasPrefix(string(buf[:n]), "added") {
			held = c
			return true
		}
		c.Close()
		return false
	})
	defer held.Close()
	srv.Kill()
	testnet.Eventually(t, "a remove to be refused", func() bool {
		err = m.RemoveBackend(context.Background(), "p", added.Addr, time.Second)
		return err != nil
	})
	t.Logf("remove refused: %v", err)
	for _, p := range in.livePools() {
		for _, b := range p.Backends() {
			t.Logf("backend %s source %s draining %v", b.Addr, b.Source(), b.Draining())
			if b.Addr == added.Addr && b.Draining() {
				t.Errorf("the remove was refused (%v), yet the backend stays draining (no new clients; reset at the drain's deadline)", err)
			}
		}
	}
	time.Sleep(2 * time.Second)
	held.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, rerr := held.Read(make([]byte, 64))
	t.Logf("held client after the drain's deadline: %v", rerr)
	if rerr != nil && !os.IsTimeout(rerr) {
		t.Errorf("the remove was refused with 503, yet the client of the backend kept was cut: %v", rerr)
	}
}

// a DNS change that comes while an upgrade refuses actions is
// never served once the upgrade failed and actions are allowed again.
func TestADiscoveryChangeDuringAnUpgradeWindowIsServedAfterIt(t *testing.T) {
	back := testnet.StartBackend(t, "b", "")
	fp := testnet.FreeAddr(t)
	in, _ := startFile(t, membersTestConfig(map[string]string{"fp": fp}, []string{"p"}, back.Addr))
	allow := in.config.RefuseActions("an upgrade is under way")
	d := config.DefaultDiscovery()
	d.DNS = "web.test:80"
	in.discovered("p", d, discovery.Set{Backends: []discovery.Backend{{Addr: netip.MustParseAddrPort("127.0.0.1:9"), Weight: 1}}})
	time.Sleep(300 * time.Millisecond) // the applier tries, and is refused
	allow()                            // the upgrade failed: this process goes on
	// The watcher's next lookups find the same set: Discovered reports no change.
	in.discovered("p", d, discovery.Set{Backends: []discovery.Backend{{Addr: netip.MustParseAddrPort("127.0.0.1:9"), Weight: 1}}})
	time.Sleep(1 * time.Second)
	got := poolAddrs(in, "p")
	t.Logf("pool p after the window: %v; members version %d", got, in.members.Version())
	if len(got) != 2 {
		t.Fatalf("the discovered backend was never served: %v", got)
	}
}

// in a fleet, a reload that drops a pool, then one that brings it
// back, leaves this instance without the fleet's API backends of it; its
// next add writes its own list and wipes the others fleet-wide.
func TestAPoolBackInTheFileGetsTheFleetsBackends(t *testing.T) {
	srv := testnet.StartRedis(t)
	back := testnet.StartBackend(t, "b", "")
	fp, fq := testnet.FreeAddr(t), testnet.FreeAddr(t)
	cluster := fmt.Sprintf("[cluster]\nstore = \"redis\"\nredis_url = %q\ninstance = \"r1\"\ntimeout = \"200ms\"\nsync_interval = \"500ms\"\n", srv.URL())
	both := cluster + membersTestConfig(map[string]string{"fp": fp, "fq": fq}, []string{"p", "q"}, back.Addr)
	onlyP := cluster + membersTestConfig(map[string]string{"fp": fp}, []string{"p"}, back.Addr)
	in, path := startFile(t, both)
	m := apiMembers{in}
	testnet.Eventually(t, "the add of X", func() bool {
		return m.AddBackend(context.Background(), "q", admin.NewBackend{Addr: "127.0.0.1:9", Weight: 1}) == nil
	})
	for _, text := range []string{onlyP, both} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, errs := in.reload(); len(errs) > 0 {
			t.Fatal(errs)
		}
	}
	time.Sleep(time.Second)
	doc, _ := in.store.fleet.Members(context.Background(), "q")
	t.Logf("q served after the pool came back: %v; fleet doc %s", poolAddrs(in, "q"), doc)
	if err := m.AddBackend(context.Background(), "q", admin.NewBackend{Addr: "127.0.0.1:10", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	doc, _ = in.store.fleet.Members(context.Background(), "q")
	t.Logf("fleet doc after adding Y: %s", doc)
	if !strings.Contains(string(doc), "127.0.0.1:9\"") {
		t.Fatalf("X, still in the fleet's record before, was wiped by an add of Y: %s", doc)
	}
}

// a client waiting for recovery keeps the pool it was accepted
// for; a membership change (DNS, API) that brings a usable backend builds
// a new pool, and the waiter is never told.
func TestRecoveryWaiterAcrossAMembershipChange(t *testing.T) {
	down := testnet.FreeAddr(t)
	live := testnet.StartBackend(t, "live", "")
	fp := testnet.FreeAddr(t)
	text := fmt.Sprintf("[admin]\nlisten = \"\"\n[[listener]]\nname = \"fp\"\nbind = %q\npool = \"p\"\n[pool.p]\nretries = 0\nconnect_budget = \"20s\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"\n[[pool.p.backend]]\naddr = %q\n", fp, down)
	in, _ := startFile(t, text)
	c, err := net.Dial("tcp", fp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(300 * time.Millisecond) // its dial refused, the breaker open: it waits
	if err := (apiMembers{in}).AddBackend(context.Background(), "p", admin.NewBackend{Addr: live.Addr, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	if got, err := testnet.Hello(fp, ""); err != nil || got != "live" {
		t.Fatalf("a new client: %q %v", got, err)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	t.Logf("the waiting client, after %v: %q %v", time.Since(start).Round(time.Millisecond), buf[:n], err)
	if n == 0 {
		t.Fatalf("the client held through the outage was refused after %v while the pool had a live backend", time.Since(start).Round(time.Millisecond))
	}
}

// discovery changes, API changes and reloads at once, then stop.
func TestMembershipStress(t *testing.T) {
	back := testnet.StartBackend(t, "b", "")
	fp := testnet.FreeAddr(t)
	text := membersTestConfig(map[string]string{"fp": fp}, []string{"p"}, back.Addr)
	in, _ := startFile(t, text)
	d := config.DefaultDiscovery()
	d.DNS = "web.test:80"
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			in.discovered("p", d, discovery.Set{Backends: []discovery.Backend{{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), uint16(1000+i%7)), Weight: 1}}})
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			in.reload()
		}
	}()
	go func() {
		defer wg.Done()
		m := apiMembers{in}
		for i := 0; i < 30; i++ {
			a := fmt.Sprintf("127.0.0.3:%d", 2000+i%3)
			m.AddBackend(context.Background(), "p", admin.NewBackend{Addr: a, Weight: 1})
			m.RemoveBackend(context.Background(), "p", a, 0)
		}
	}()
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("stuck")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { in.shutdown(ctx); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown stuck")
	}
}

// a DNS change during the shutdown's drain.
func TestMembershipChangesDuringAShutdownAreRefusedQuietly(t *testing.T) {
	back := testnet.StartBackend(t, "b", "")
	fp := testnet.FreeAddr(t)
	path := t.TempDir() + "/l4lb.toml"
	os.WriteFile(path, []byte(membersTestConfig(map[string]string{"fp": fp}, []string{"p"}, back.Addr)), 0o644)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs testnet.LogBuffer
	in, err := start(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	in.useFile(path)
	c, err := net.Dial("tcp", fp)
	if err != nil {
		t.Fatal(err)
	}
	c.Read(make([]byte, 64))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { in.shutdown(ctx); close(stopped) }()
	time.Sleep(200 * time.Millisecond)
	d := config.DefaultDiscovery()
	d.DNS = "web.test:80"
	in.discovered("p", d, discovery.Set{Backends: []discovery.Backend{{Addr: netip.MustParseAddrPort("127.0.0.2:80"), Weight: 1}}})
	err = (apiMembers{in}).AddBackend(context.Background(), "p", admin.NewBackend{Addr: "127.0.0.3:80", Weight: 1})
	if err == nil || errors.Is(err, admin.ErrInvalid) {
		t.Errorf("add during the drain: %v; want it refused as l4lb stopping, not as an invalid backend (400)", err)
	}
	<-stopped
	c.Close()
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("an error logged for a change during the drain: %s", l)
		}
	}
}

// one API-added backend in the state file that the pool cannot be
// built with: start falls back to the file's backends, and then?
func TestAnUnbuildableStateFileEntryIsLeftOut(t *testing.T) {
	back := testnet.StartBackend(t, "b", "")
	fp := testnet.FreeAddr(t)
	dir := t.TempDir()
	sf := dir + "/state.json"
	os.WriteFile(sf, []byte(`{"format":"l4lb-state","version":1,"disabled":[],"backends":{},"added":{"p":[{"addr":"127.0.0.1:9","weight":100000}]}}`), 0o644)
	text := fmt.Sprintf("[global]\nstate_file = %q\n", sf) + membersTestConfig(map[string]string{"fp": fp}, []string{"p"}, back.Addr)
	in, _ := startFile(t, text)
	t.Logf("p at start: %v", poolAddrs(in, "p"))
	_, errs := in.reload()
	t.Logf("reload of the same file: %v", errs)
	err := (apiMembers{in}).AddBackend(context.Background(), "p", admin.NewBackend{Addr: "127.0.0.1:10", Weight: 1})
	t.Logf("an add: %v", err)
	if len(errs) > 0 || err != nil {
		t.Errorf("one unbuildable entry in the state file wedges reloads and membership changes")
	}
}

// an API backend whose id is an address DNS later finds.
func TestAnIdentityClashAcrossSourcesKeepsThePoolBuildable(t *testing.T) {
	back := testnet.StartBackend(t, "b", "")
	fp := testnet.FreeAddr(t)
	in, _ := startFile(t, membersTestConfig(map[string]string{"fp": fp}, []string{"p"}, back.Addr)+"[pool.p.discovery]\ndns = \"web.test:80\"\nresolvers = [\"127.0.0.1:1\"]\n")
	if err := (apiMembers{in}).AddBackend(context.Background(), "p", admin.NewBackend{Addr: "127.0.0.1:9", Weight: 1, ID: "127.0.0.2:80"}); err != nil {
		t.Fatal(err)
	}
	d := config.DefaultDiscovery()
	d.DNS = "web.test:80"
	in.discovered("p", d, discovery.Set{Backends: []discovery.Backend{{Addr: netip.MustParseAddrPort("127.0.0.2:80"), Weight: 1}}})
	time.Sleep(300 * time.Millisecond)
	t.Logf("p: %v", poolAddrs(in, "p"))
	_, errs := in.reload()
	t.Logf("a reload of the unchanged file: %v", errs)
	err := (apiMembers{in}).AddBackend(context.Background(), "p", admin.NewBackend{Addr: "127.0.0.1:10", Weight: 1})
	t.Logf("an unrelated add: %v", err)
	if len(errs) > 0 || err != nil {
		t.Errorf("wedged")
	}
}

// Two operators add backends to one pool at once, through two instances
// of a fleet: every add holds, on Redis and on both instances. Each
// instance writes the whole list it holds, so before the fleet store
// refused a list made on a record another instance had replaced
// meanwhile, the slower of two writes undid the other's add.
func TestConcurrentAddsThroughTwoInstancesAllHold(t *testing.T) {
	srv := testnet.StartRedis(t)
	back := testnet.StartBackend(t, "b", "")
	cluster := func(name string) string {
		return fmt.Sprintf("[cluster]\nstore = \"redis\"\nredis_url = %q\ninstance = %q\ntimeout = \"500ms\"\nsync_interval = \"2s\"\n", srv.URL(), name)
	}
	var ins []*instance
	for _, name := range []string{"r1", "r2"} {
		in, _ := startFile(t, cluster(name)+membersTestConfig(map[string]string{"fp": testnet.FreeAddr(t)}, []string{"p"}, back.Addr))
		ins = append(ins, in)
	}
	const each = 8
	want := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for k, in := range ins {
		m := apiMembers{in}
		for i := range each {
			want[fmt.Sprintf("127.0.%d.%d:80", k+1, i+1)+"/api"] = true
		}
		wg.Go(func() {
			for i := range each {
				addr := fmt.Sprintf("127.0.%d.%d:80", k+1, i+1)
				if err := m.AddBackend(context.Background(), "p", admin.NewBackend{Addr: addr, Weight: 1}); err != nil {
					errs <- fmt.Errorf("add %s through r%d: %w", addr, k+1, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for k, in := range ins {
		var got []string
		testnet.Eventually(t, fmt.Sprintf("r%d to serve all %d adds", k+1, len(want)), func() bool {
			got = poolAddrs(in, "p")
			n := 0
			for _, a := range got {
				if want[a] {
					n++
				}
			}
			return n == len(want)
		})
	}
	doc, err := ins[0].store.fleet.Members(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	var list []membership.Added
	if err := json.Unmarshal(doc, &list); err != nil || len(list) != len(want) {
		t.Fatalf("the fleet's record holds %d adds (%v), want %d: %s", len(list), err, len(want), doc)
	}
}
