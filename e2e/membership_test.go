package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Issue 28's membership with the real binary: backends added and removed
// by DNS and through the admin API, under load, through reloads,
// upgrades and restarts.

// adminCall makes one admin API request (body "" for none) and returns
// the status and the body.
func adminCall(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// keysToBackends connects once from each of keys (source addresses) and
// returns the backend each reached, a few clients at a time; a client
// that fails fails the test.
func keysToBackends(t *testing.T, listen string, keys []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	next := make(chan string)
	for range 8 {
		wg.Go(func() {
			for k := range next {
				tag, err := testnet.Hello(listen, k)
				if err != nil {
					errs <- fmt.Errorf("client from %s: %v", k, err)
					continue
				}
				mu.Lock()
				out[k] = tag
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// Fifty changes of membership under a steady client load, DNS (the
// name's A records) and the admin API (adds and removes) mixed: no client
// fails, and a client key moves only when its backend left or to a
// backend that arrived. Consistent hashing moves no other key; Maglev's
// rebuilt table moves a few between backends that both stayed (measured
// per change: at most 2% of the keys, 4 of 200, most changes none; a
// table built by position rather than by identity moves a quarter or
// more), so at most 3% passes.
func TestMembershipChangesUnderLoad(t *testing.T) {
	t.Run("maglev", func(t *testing.T) { membershipChurn(t, "maglev", 3) })
	t.Run("consistent-hash", func(t *testing.T) { membershipChurn(t, "consistent-hash", 0) })
}

// membershipChurn makes the fifty changes to a pool of algorithm,
// failing if a change moves more than percent of the keys between
// backends that both stayed.
func membershipChurn(t *testing.T, algorithm string, percent int) {
	var ips []string
	for i := 2; i <= 11; i++ {
		ips = append(ips, fmt.Sprintf("127.0.0.%d", i))
	}
	port, _ := backendsAtOnePort(t, ips...)
	dnsIPs, apiIPs := ips[:6], ips[6:]
	named := map[string]bool{ips[0]: true, ips[1]: true, ips[2]: true} // in the name now
	added := map[string]bool{}                                         // through the API now
	hosts := func() string {
		var in []string
		for _, ip := range dnsIPs {
			if named[ip] {
				in = append(in, ip)
			}
		}
		return hostsOf("web", in...)
	}
	// Records that live 0 s: l4lb looks again every min_refresh (100 ms).
	dns := testnet.StartZoneDNS(t, "127.0.57.1", "10.57.0.1", discZone, hosts(), "--local-ttl=0")
	c := newLBConfig(t)
	c.pool = fmt.Sprintf("algorithm = %q\nhash_key = \"source-ip\"\n", algorithm)
	c.discovery = dnsLookup(dns, "web", port, "")
	l := startDiscovering(t, c)
	want := func() map[string]string {
		out := map[string]string{}
		for ip := range named {
			out[atPort(ip, port)] = "dns"
		}
		for ip := range added {
			out[atPort(ip, port)] = "api"
		}
		return out
	}
	waitMembers(t, c.admin, want())

	var keys []string
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("127.0.%d.%d", 3+i/100, 1+i%100))
	}
	before := keysToBackends(t, c.listen, keys)
	load := startSteadyClients(t, c.listen)
	rng := rand.New(rand.NewPCG(28, 28))
	var moves, arrived []int
	was := want()
	for i := 0; len(moves) < 50; i++ {
		if i == 500 {
			t.Fatalf("only %d changes in 500 steps", len(moves))
		}
		// A DNS change, then the API's, in turn; an address of the
		// source's own is taken out or put in, at least two backends
		// left in all and one in the name (a step that would leave
		// fewer is skipped).
		byDNS := len(moves)%2 == 0
		group, in := apiIPs, added
		if byDNS {
			group, in = dnsIPs, named
		}
		ip := group[rng.IntN(len(group))]
		if in[ip] && (len(named)+len(added) <= 2 || byDNS && len(named) == 1) {
			continue
		}
		addr := atPort(ip, port)
		switch {
		case byDNS:
			if !named[ip] {
				named[ip] = true
			} else {
				delete(named, ip)
			}
			dns.WriteHosts(t, hosts())
			dns.Reload(t)
		case added[ip]:
			delete(added, ip)
			if code, body := adminCall(t, "DELETE", "http://"+c.admin+"/api/v1/pools/p/backends/"+addr+"?timeout=5s", ""); code != 200 && code != 202 {
				t.Fatalf("change %d: remove %s: %d %s", len(moves)+1, addr, code, body)
			}
		default:
			added[ip] = true
			if code, body := adminCall(t, "POST", "http://"+c.admin+"/api/v1/pools/p/backends", fmt.Sprintf(`{"addr":%q}`, addr)); code != 200 && code != 201 {
				t.Fatalf("change %d: add %s: %d %s", len(moves)+1, addr, code, body)
			}
		}
		now := want()
		waitMembers(t, c.admin, now)
		after := keysToBackends(t, c.listen, keys)
		// A key may go to a backend that arrived (its share of the
		// keys), or leave one that left; a move between two backends
		// that were there before and are still there is the table's.
		n, toNew := 0, 0
		for _, k := range keys {
			_, fromStayed := now[before[k]]
			_, toOld := was[after[k]]
			switch {
			case after[k] == before[k] || !fromStayed:
			case toOld:
				n++
			default:
				toNew++
			}
		}
		moves = append(moves, n)
		arrived = append(arrived, toNew)
		before, was = after, now
	}
	load.end()
	t.Logf("%s, %d keys: keys moved between backends that both stayed, per change: %v (max %d); keys that went to an arriving backend: %v; %d clients served under the load",
		algorithm, len(keys), moves, slices.Max(moves), arrived, load.served.Load())
	if n := load.failed.Load(); n != 0 {
		t.Errorf("%d of %d clients failed under the steady load: %v", n, n+load.served.Load(), load.errs)
	}
	if m := slices.Max(moves); m > len(keys)*percent/100 {
		t.Errorf("a change moved %d of %d keys between backends that both stayed; want at most %d%%: %v", m, len(keys), percent, moves)
	}
	if !strings.Contains(l.stderr.String(), "pool membership changed") {
		t.Error("no log line says the membership changed")
	}
}

// ctlRun runs `l4lb ctl -admin ADDR args...`: the exit code and what it
// printed.
func ctlRun(t *testing.T, adminAddr string, args ...string) (int, string) {
	t.Helper()
	var out strings.Builder
	code := runL4LB(t, append([]string{"ctl", "-admin", adminAddr}, args...), &out, &out)
	return code, out.String()
}

// A backend added through the API (l4lb ctl add) outlives a reload, an
// upgrade and, with state_file, a restart; once the file names its
// address it is the file's and the API forgets it; ctl remove refuses
// the file's, and takes an API backend out: no new client at once, a
// connection still open cut at the remove's timeout.
func TestAPIMembershipPersists(t *testing.T) {
	f, a, b := testnet.StartBackend(t, "f", ""), testnet.StartBackend(t, "a", ""), testnet.StartBackend(t, "b", "")
	c := newLBConfig(t)
	c.global = fmt.Sprintf("state_file = %q\n", filepath.Join(t.TempDir(), "l4lb.state"))
	c.pool = "algorithm = \"round-robin\"\n"
	c.files = []string{f.Addr}
	c.write(t)
	chain := startChain(t, l4lbBin, c.path)
	waitMembers(t, c.admin, bySource("file", f.Addr))

	if code, out := ctlRun(t, c.admin, "add", "p", a.Addr, "-weight", "2"); code != 0 || !strings.Contains(out, "added "+a.Addr) {
		t.Fatalf("ctl add: exit %d:\n%s", code, out)
	}
	withA := map[string]string{f.Addr: "file", a.Addr: "api"}
	if m := waitMembers(t, c.admin, withA); m[a.Addr].Weight != 2 {
		t.Fatalf("the added backend: %v; want weight 2", m)
	}
	testnet.Eventually(t, "a client to reach the added backend", func() bool {
		tag, err := testnet.Hello(c.listen, "")
		return err == nil && tag == "a"
	})

	reloads := strings.Count(chain.logText(), "configuration reloaded")
	if err := syscall.Kill(chain.pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the reload", func() bool { return strings.Count(chain.logText(), "configuration reloaded") > reloads })
	waitMembers(t, c.admin, withA)

	chain.upgrade(t)
	if m := members(backends(t, c.admin, "p")); !m.are(withA) || m[a.Addr].Weight != 2 {
		t.Fatalf("after the upgrade the pool has %v; want the API's backend handed over, weight 2", m)
	}

	// A restart: stopped, then started again on the same state file.
	pid := chain.pid
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "l4lb to stop", func() bool { return processGone(pid) })
	chain = startChain(t, l4lbBin, c.path)
	if m := waitMembers(t, c.admin, withA); m[a.Addr].Weight != 2 {
		t.Fatalf("after the restart the pool has %v; want the API's backend back from the state file, weight 2", m)
	}

	// The file comes to name a's address: a is the file's, and the API
	// may not remove it.
	c.files = []string{f.Addr, a.Addr}
	c.write(t)
	if code, out := ctlRun(t, c.admin, "reload"); code != 0 {
		t.Fatalf("ctl reload: exit %d:\n%s", code, out)
	}
	waitMembers(t, c.admin, bySource("file", f.Addr, a.Addr))
	if code, out := ctlRun(t, c.admin, "remove", "p", a.Addr); code == 0 || !strings.Contains(out, "409") {
		t.Fatalf("ctl remove of a backend the file names: exit %d:\n%s; want refused (409)", code, out)
	}
	// ...and once the file drops it, it is gone: the API forgot it.
	c.files = []string{f.Addr}
	c.write(t)
	if code, out := ctlRun(t, c.admin, "reload"); code != 0 {
		t.Fatalf("ctl reload: exit %d:\n%s", code, out)
	}
	waitMembers(t, c.admin, bySource("file", f.Addr))

	// ctl add, pools, remove.
	if code, out := ctlRun(t, c.admin, "add", "p", b.Addr); code != 0 {
		t.Fatalf("ctl add: exit %d:\n%s", code, out)
	}
	waitMembers(t, c.admin, map[string]string{f.Addr: "file", b.Addr: "api"})
	if code, out := ctlRun(t, c.admin, "pools"); code != 0 || !strings.Contains(out, b.Addr) || !strings.Contains(out, "api") {
		t.Fatalf("ctl pools: exit %d:\n%s; want %s listed, from the API", code, out, b.Addr)
	}
	// remove: no new client at once; a connection still open at the
	// timeout is cut.
	conn, r := openTo(t, c.listen, "b")
	removing := time.Now()
	if code, out := ctlRun(t, c.admin, "remove", "p", b.Addr, "-timeout", "1s"); code != 0 {
		t.Fatalf("ctl remove: exit %d:\n%s", code, out)
	}
	waitMembers(t, c.admin, bySource("file", f.Addr))
	if got := tagsOf(t, c.listen, "", 10); got["f"] != 10 {
		t.Fatalf("after remove clients reached %v; want f alone", got)
	}
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || os.IsTimeout(err) {
		t.Fatalf("the connection open to the removed backend: %v; want it cut at the remove's timeout", err)
	}
	if took := time.Since(removing); took < time.Second {
		t.Fatalf("the connection to the removed backend was cut %v after the remove; want no sooner than its 1s timeout", took)
	}
}

// The precedence rule (pkg/membership) with the real binary: a reload
// that keeps the discovery block keeps its set; an API backend whose
// address DNS comes to name is DNS's (the API may not remove it) and the
// API's again once DNS drops it, its connection open all along; the API
// may not add an address DNS names; a reload that names another name
// follows it; the file wins an address DNS names too.
func TestMembershipPrecedence(t *testing.T) {
	port, be := backendsAtOnePort(t, "127.0.0.2", "127.0.0.3")
	a2, a3 := be[0].Addr, be[1].Addr
	dns := testnet.StartZoneDNS(t, "127.0.57.1", "10.57.0.1", discZone, hostsOf("web", "127.0.0.2"))
	c := newLBConfig(t)
	c.pool = "algorithm = \"round-robin\"\n"
	c.discovery = dnsLookup(dns, "web", port, "")
	l := startDiscovering(t, c)
	waitMembers(t, c.admin, bySource("dns", a2))

	l.signal(t, syscall.SIGHUP)
	testnet.Eventually(t, "the reload", func() bool { return strings.Contains(l.stderr.String(), "configuration reloaded") })
	if m := members(backends(t, c.admin, "p")); !m.are(bySource("dns", a2)) {
		t.Fatalf("after a reload that keeps the discovery block the pool has %v; want the discovered set kept", m)
	}

	backendsURL := "http://" + c.admin + "/api/v1/pools/p/backends"
	if code, body := adminCall(t, "POST", backendsURL, fmt.Sprintf(`{"addr":%q}`, a3)); code != 200 && code != 201 {
		t.Fatalf("add %s: %d %s", a3, code, body)
	}
	waitMembers(t, c.admin, map[string]string{a2: "dns", a3: "api"})
	conn, r := openTo(t, c.listen, a3)

	dns.WriteHosts(t, hostsOf("web", "127.0.0.2", "127.0.0.3"))
	dns.Reload(t)
	waitMembers(t, c.admin, bySource("dns", a2, a3))
	echoes(t, conn, r, "the connection to a3 once DNS names it")
	if code, body := adminCall(t, "DELETE", backendsURL+"/"+a3, ""); code != 409 {
		t.Fatalf("remove of a backend DNS names: %d %s; want 409", code, body)
	}
	if code, body := adminCall(t, "POST", backendsURL, fmt.Sprintf(`{"addr":%q}`, a2)); code != 409 {
		t.Fatalf("add of an address DNS names: %d %s; want 409", code, body)
	}

	dns.WriteHosts(t, hostsOf("web", "127.0.0.2"))
	dns.Reload(t)
	waitMembers(t, c.admin, map[string]string{a2: "dns", a3: "api"})
	echoes(t, conn, r, "the connection to a3 once DNS dropped it and the API's entry took it back")
	if code, body := adminCall(t, "DELETE", backendsURL+"/"+a3+"?timeout=1s", ""); code != 200 && code != 202 {
		t.Fatalf("remove %s: %d %s", a3, code, body)
	}
	waitMembers(t, c.admin, bySource("dns", a2))

	// A reload that names another name follows it.
	dns.WriteHosts(t, hostsOf("web", "127.0.0.2")+hostsOf("other", "127.0.0.3"))
	dns.Reload(t)
	c.discovery = dnsLookup(dns, "other", port, "")
	c.write(t)
	l.signal(t, syscall.SIGHUP)
	waitMembers(t, c.admin, bySource("dns", a3))

	// The file names the address DNS names: one backend, the file's.
	c.files = []string{a3}
	c.write(t)
	l.signal(t, syscall.SIGHUP)
	waitMembers(t, c.admin, bySource("file", a3))
}
