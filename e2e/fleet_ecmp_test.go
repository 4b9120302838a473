package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A fleet behind ECMP. Three l4lb instances share breaker state and manual
// disables through one redis-server ([cluster] store = "redis"); their
// pool hashes the client address with Maglev, so they should send a
// client to the same backend whichever instance a router hands it to, with
// no word between them but what Redis carries. The router is an nft nat
// rule that spreads connections to one virtual address over the three
// listeners at random per connection (numgen random mod 3), a stand-in for
// ECMP. Clients connect from 64 loopback addresses.
//
// The whole scenario runs in a network namespace of its own, so the nat
// rule touches nothing of the host: the test binary re-runs itself inside
// it (testnet.RunInNetns), and everything it starts (redis-server, the
// backends, the three l4lb processes, the clients) lives there.
//
// Which instance took a connection and which backend it chose is read
// from each instance's own access log (access = "text" on its standard
// error), so agreement is checked per instance, not only from the
// clients' side.

const ecmpChildEnv = "L4LB_TEST_FLEET_ECMP_CHILD"

func TestFleetInstancesAgreeBehindECMPSpread(t *testing.T) {
	testnet.NeedNetns(t)
	testnet.RunInNetns(t, ecmpChildEnv, "TestFleetECMPInNamespace", 4*time.Minute)
}

const (
	ecmpInstances   = 3
	ecmpBackends    = 4
	ecmpClients     = 64 // source addresses 127.0.1.1 .. 127.0.1.64
	ecmpConns       = 10000
	ecmpWorkers     = 32
	ecmpPhaseCap    = 75 * time.Second // per phase; fewer connections then, said in the log
	ecmpMinConns    = 3000             // below this a phase tells too little: fail
	ecmpVIP         = "127.0.100.1"
	ecmpVPort       = 7000
	ecmpTable       = "l4lbt_ecmp"
	ecmpMinShare    = 0.20 // each instance's least share of a phase (expected 1/3)
	ecmpMinKeptFrac = 0.90 // unaffected clients keeping their backend after a disable
)

// ecmpInstance is one l4lb process of the fleet.
type ecmpInstance struct {
	name   string
	listen string
	admin  string
	p      *proc
}

// ecmpConn is one client connection's outcome.
type ecmpConn struct {
	client string // source address (no port)
	local  string // source address:port
	tag    string // the backend's tag line
	err    error
}

// ecmpRecord is an access-log line of one instance.
type ecmpRecord struct {
	instance int
	client   string // address:port
	backend  string
	result   string
}

func TestFleetECMPInNamespace(t *testing.T) {
	if os.Getenv(ecmpChildEnv) == "" {
		t.Skip("run by TestFleetInstancesAgreeBehindECMPSpread inside its network namespace")
	}
	testnet.CheckLeaks(t)
	redis := testnet.StartRedis(t)

	tagOf := map[string]string{}  // backend address -> tag
	addrOf := map[string]string{} // tag -> backend address
	var addrs []string
	for i := range ecmpBackends {
		b := testnet.StartBackend(t, fmt.Sprintf("b%d", i), "")
		tagOf[b.Addr], addrOf[b.Tag] = b.Tag, b.Addr
		addrs = append(addrs, b.Addr)
	}

	dir := t.TempDir()
	var insts []*ecmpInstance
	for i := range ecmpInstances {
		in := &ecmpInstance{name: fmt.Sprintf("ecmp-%d", i), listen: testnet.FreeAddr(t), admin: testnet.FreeAddr(t)}
		path := filepath.Join(dir, in.name+".toml")
		if err := os.WriteFile(path, []byte(ecmpConfig(redis.URL(), in, addrs)), 0o644); err != nil {
			t.Fatal(err)
		}
		// Killed with this process should it die before its cleanups.
		in.p = startL4LB(t, "", &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}, "-config", path)
		insts = append(insts, in)
	}
	for _, in := range insts {
		waitServing(t, in.p, in.listen)
		ecmpWaitMetric(t, in, "l4lb_cluster_store_up", "to join Redis", func(v float64) bool { return v == 1 })
	}
	ecmpInstallSpread(t, insts)

	// Phase 1: all four backends up.
	offsets := make([]int, len(insts))
	conns1, recs1 := ecmpPhase(t, "phase 1", insts, offsets)
	on1 := ecmpCheckAgreement(t, "phase 1", insts, conns1, recs1, tagOf)
	counts := map[string]int{}
	for _, tag := range on1 {
		counts[tag]++
	}
	if len(counts) != ecmpBackends {
		t.Fatalf("phase 1: clients reached %d backends, want all %d: %v", len(counts), ecmpBackends, counts)
	}
	t.Logf("phase 1: clients per backend %v", counts)

	// Disable the backend with the most clients, through one instance's
	// admin API; the other two learn it through Redis alone.
	victim := ""
	for tag, n := range counts {
		if victim == "" || n > counts[victim] || n == counts[victim] && tag < victim {
			victim = tag
		}
	}
	victimAddr := addrOf[victim]
	for _, in := range insts {
		if v := ecmpMustMetric(t, in, ecmpSeries("l4lb_backend_disabled", victimAddr)); v != 0 {
			t.Fatalf("%s reports %s disabled (%v) before the disable", in.name, victimAddr, v)
		}
	}
	asked := time.Now()
	if code := ecmpPost(t, "http://"+insts[0].admin+"/api/v1/pools/p/backends/"+victimAddr+"/disable"); code != http.StatusOK {
		t.Fatalf("disable %s through %s: status %d", victimAddr, insts[0].name, code)
	}
	// Polled round the three until each says so: each time is when that
	// instance was first seen reporting it (an upper bound, one scrape
	// of each instance per round).
	seenAt := make([]time.Duration, len(insts))
	testnet.Eventually(t, "every instance to report "+victimAddr+" disabled", func() bool {
		all := true
		for i, in := range insts {
			if seenAt[i] == 0 {
				if v, err := ecmpMetric(in, ecmpSeries("l4lb_backend_disabled", victimAddr)); err == nil && v == 1 {
					seenAt[i] = time.Since(asked)
				} else {
					all = false
				}
			}
		}
		return all
	})
	for i, in := range insts {
		t.Logf("%s reported %s (%s) disabled within %v of the request to %s", in.name, victim, victimAddr,
			seenAt[i].Round(time.Millisecond), insts[0].name)
	}
	// The key that carried it (pkg/fleet/keys.go: prefix, {pool/backend}, field).
	if v, err := redis.Do("GET", "l4lb:{p/"+victimAddr+"}:disabled"); err != nil || v != "1" {
		t.Fatalf("the disable key in Redis is %q (%v), want \"1\"", v, err)
	}

	// Phase 2: one backend disabled fleet-wide.
	conns2, recs2 := ecmpPhase(t, "phase 2", insts, offsets)
	on2 := ecmpCheckAgreement(t, "phase 2", insts, conns2, recs2, tagOf)
	for _, c := range conns2 {
		if c.err == nil && c.tag == victim {
			t.Fatalf("phase 2: client %s reached the disabled backend %s", c.local, victim)
		}
	}
	for _, r := range recs2 {
		if r.backend == victimAddr {
			t.Fatalf("phase 2: %s sent client %s to the disabled backend %s", insts[r.instance].name, r.client, victimAddr)
		}
	}
	kept, unaffected, moved := 0, 0, map[string]int{}
	for client, before := range on1 {
		after, ok := on2[client]
		if !ok {
			continue // no connection of this client in phase 2 (only if the cap cut it short)
		}
		if before == victim {
			moved[after]++
			continue
		}
		unaffected++
		if after == before {
			kept++
		}
	}
	if unaffected == 0 {
		t.Fatal("no client unaffected by the disable was seen in both phases")
	}
	frac := float64(kept) / float64(unaffected)
	t.Logf("after the disable: %d of %d unaffected clients kept their backend (%.1f%%); the disabled backend's %d clients moved to %v",
		kept, unaffected, 100*frac, counts[victim], moved)
	if frac < ecmpMinKeptFrac {
		t.Fatalf("only %.1f%% of the clients not on the disabled backend kept theirs, want at least %.0f%%", 100*frac, 100*ecmpMinKeptFrac)
	}
}

// ecmpConfig is an instance's configuration: the same for all three but
// for [cluster] instance and the listener's and admin's addresses.
func ecmpConfig(redisURL string, in *ecmpInstance, backends []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = %q\n", in.admin)
	// The access log (to standard error) says which instance took each
	// connection and where it sent it.
	b.WriteString("[log]\nlevel = \"warn\"\naccess = \"text\"\n")
	fmt.Fprintf(&b, "[cluster]\nstore = \"redis\"\nredis_url = %q\ninstance = %q\n", redisURL, in.name)
	fmt.Fprintf(&b, "[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", in.listen)
	// Health checks are each instance's own view and could differ between
	// them on a loaded machine; this test is about what they share.
	b.WriteString("[pool.p]\nalgorithm = \"maglev\"\nhash_key = \"source-ip\"\n[pool.p.health]\nenabled = false\n")
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	return b.String()
}

// ecmpInstallSpread adds the nat rule: a connection to ecmpVIP:ecmpVPort
// goes to one of the instances' listeners, at random, counted per
// instance. The namespace is the test's own; the table is deleted at the
// end all the same.
func ecmpInstallSpread(t *testing.T, insts []*ecmpInstance) {
	t.Helper()
	var rules strings.Builder
	fmt.Fprintf(&rules, "table ip %s {\n", ecmpTable)
	var vmap []string
	for i, in := range insts {
		fmt.Fprintf(&rules, "\tchain to%d {\n\t\tmeta l4proto tcp counter dnat to %s\n\t}\n", i, in.listen)
		vmap = append(vmap, fmt.Sprintf("%d : jump to%d", i, i))
	}
	fmt.Fprintf(&rules, "\tchain out {\n\t\ttype nat hook output priority -100;\n")
	fmt.Fprintf(&rules, "\t\tip daddr %s tcp dport %d numgen random mod %d vmap { %s }\n\t}\n}\n",
		ecmpVIP, ecmpVPort, len(insts), strings.Join(vmap, ", "))
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v\n%s\n%s", err, out, rules.String())
	}
	t.Cleanup(func() {
		if out, err := exec.Command("nft", "delete", "table", "ip", ecmpTable).CombinedOutput(); err != nil {
			t.Errorf("nft delete table: %v\n%s", err, out)
		}
	})
}

// ecmpCounters reads the per-instance packet counters of the nat rule (one
// packet per connection: nat sees only a connection's first).
func ecmpCounters(t *testing.T, n int) []int {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "ip", ecmpTable).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table: %v\n%s", err, out)
	}
	counts := make([]int, n)
	for _, m := range regexp.MustCompile(`chain to(\d+) \{\s*meta l4proto tcp counter packets (\d+)`).FindAllStringSubmatch(string(out), -1) {
		i, _ := strconv.Atoi(m[1])
		v, _ := strconv.Atoi(m[2])
		if i < n {
			counts[i] = v
		}
	}
	return counts
}

// ecmpPhase runs up to ecmpConns connections to the virtual address, from
// the 64 client addresses in turn, ecmpWorkers at a time, each reading the
// backend's tag; it stops early at ecmpPhaseCap. It then waits until every
// instance has logged its share of them and returns the connections and
// the access-log records of the phase; offsets (per instance, into its
// standard error) mark where the phase's records begin and are moved past
// them.
func ecmpPhase(t *testing.T, phase string, insts []*ecmpInstance, offsets []int) ([]ecmpConn, []ecmpRecord) {
	t.Helper()
	nftBefore := ecmpCounters(t, len(insts))
	okBefore := make([]float64, len(insts))
	droppedBefore := make([]float64, len(insts))
	for i, in := range insts {
		okBefore[i] = ecmpMustMetric(t, in, `l4lb_client_connections_total{listener="front",result="ok"}`)
		droppedBefore[i] = ecmpMustMetric(t, in, "l4lb_access_log_dropped_total")
	}

	start := time.Now()
	deadline := start.Add(ecmpPhaseCap)
	conns := make([]ecmpConn, ecmpConns)
	var next atomic.Int64
	var wg sync.WaitGroup
	vip := net.JoinHostPort(ecmpVIP, strconv.Itoa(ecmpVPort))
	for range ecmpWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= ecmpConns || time.Now().After(deadline) {
					return
				}
				conns[i] = ecmpHello(vip, fmt.Sprintf("127.0.1.%d", 1+i%ecmpClients))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	done := min(int(next.Load()), ecmpConns)
	conns = conns[:done]
	var failed []string
	for _, c := range conns {
		if c.err != nil {
			failed = append(failed, c.client+": "+c.err.Error())
		}
	}
	t.Logf("%s: %d connections in %v (%.0f/s), %d failed", phase, done, elapsed.Round(time.Millisecond),
		float64(done)/elapsed.Seconds(), len(failed))
	if done < ecmpConns {
		t.Logf("%s: the %v cap stopped it at %d of %d connections", phase, ecmpPhaseCap, done, ecmpConns)
	}
	if done < ecmpMinConns {
		t.Fatalf("%s: only %d connections within %v", phase, done, ecmpPhaseCap)
	}
	if len(failed) > 0 {
		t.Fatalf("%s: %d of %d connections failed; first: %s", phase, len(failed), done, strings.Join(failed[:min(5, len(failed))], "; "))
	}

	// Every instance took a real share, as the router counted and as the
	// instance counted.
	nftAfter := ecmpCounters(t, len(insts))
	shares := make([]int, len(insts))
	total := 0
	for i := range insts {
		shares[i] = nftAfter[i] - nftBefore[i]
		total += shares[i]
	}
	if total != done {
		t.Fatalf("%s: the nat rule counted %d connections (%v), the clients made %d", phase, total, shares, done)
	}
	var took []string
	for i, in := range insts {
		ok := int(ecmpMustMetric(t, in, `l4lb_client_connections_total{listener="front",result="ok"}`) - okBefore[i])
		took = append(took, fmt.Sprintf("%s %d (%.1f%%, l4lb counted %d)", in.name, shares[i], 100*float64(shares[i])/float64(done), ok))
		if ok != shares[i] {
			t.Errorf("%s: %s counted %d ok client connections, the nat rule sent it %d", phase, in.name, ok, shares[i])
		}
		if float64(shares[i]) < ecmpMinShare*float64(done) {
			t.Errorf("%s: %s took %d of %d connections, under %.0f%%", phase, in.name, shares[i], done, 100*ecmpMinShare)
		}
	}
	t.Logf("%s: the nat rule spread them: %s", phase, strings.Join(took, ", "))
	if t.Failed() {
		t.FailNow()
	}

	// Wait for the access logs: a line is written once a connection has
	// ended, off the event loops; one the writer dropped is counted.
	var recs []ecmpRecord
	var logged, dropped int
	testnet.Eventually(t, phase+": every instance to log its connections", func() bool {
		recs, logged, dropped = nil, 0, 0
		for i, in := range insts {
			r, _ := ecmpRecords(in.p.stderr.String(), offsets[i], i)
			recs = append(recs, r...)
			dropped += int(ecmpMustMetric(t, in, "l4lb_access_log_dropped_total") - droppedBefore[i])
		}
		logged = len(recs)
		return logged+dropped >= done
	})
	if logged+dropped != done {
		t.Fatalf("%s: %d access-log lines and %d dropped for %d connections", phase, logged, dropped, done)
	}
	if dropped > 0 {
		t.Logf("%s: %d access-log lines dropped (l4lb_access_log_dropped_total); checked on the %d logged", phase, dropped, logged)
	}
	for i, in := range insts {
		_, offsets[i] = ecmpRecords(in.p.stderr.String(), offsets[i], i)
	}
	return conns, recs
}

// ecmpHello connects to addr from the source address from and reads the
// backend's tag line.
func ecmpHello(addr, from string) ecmpConn {
	c := ecmpConn{client: from}
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		c.err = err
		return c
	}
	defer conn.Close()
	c.local = conn.LocalAddr().String()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		c.err = fmt.Errorf("from %s: %w", c.local, err)
		return c
	}
	c.tag = strings.TrimSuffix(line, "\n")
	return c
}

var ecmpAccessLine = regexp.MustCompile(`^time=\S+ listener=front pool=p client=(\S+) backend=(\S+) .* result=(\S+)$`)

// ecmpRecords parses the access-log lines of the test's clients (127.0.1.x)
// in the complete lines of text after offset, and returns them with the
// offset just past the last complete line. Other lines (l4lb's own log,
// waitServing's connections from 127.0.0.1) are passed over.
func ecmpRecords(text string, offset, instance int) ([]ecmpRecord, int) {
	end := strings.LastIndexByte(text, '\n') + 1
	if end <= offset {
		return nil, offset
	}
	var recs []ecmpRecord
	for line := range strings.SplitSeq(text[offset:end], "\n") {
		m := ecmpAccessLine.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[1], "127.0.1.") {
			continue
		}
		recs = append(recs, ecmpRecord{instance: instance, client: m[1], backend: strings.Trim(m[2], `"`), result: m[3]})
	}
	return recs, end
}

// ecmpCheckAgreement checks one phase: each client address reached one
// backend on every connection, as the clients saw it and as each instance
// logged it, with every instance taking part for every client; each
// logged record agrees with the tag its client read. It returns each
// client address's backend tag.
func ecmpCheckAgreement(t *testing.T, phase string, insts []*ecmpInstance, conns []ecmpConn, recs []ecmpRecord, tagOf map[string]string) map[string]string {
	t.Helper()
	seen := map[string]map[string]int{} // client address -> tag -> connections
	byLocal := map[string]string{}      // client address:port -> tag
	for _, c := range conns {
		if seen[c.client] == nil {
			seen[c.client] = map[string]int{}
		}
		seen[c.client][c.tag]++
		byLocal[c.local] = c.tag
	}
	if len(seen) != ecmpClients {
		t.Fatalf("%s: %d client addresses connected, want %d", phase, len(seen), ecmpClients)
	}
	on := map[string]string{}
	var split []string
	for client, tags := range seen {
		if len(tags) != 1 {
			split = append(split, fmt.Sprintf("%s reached %v", client, tags))
			continue
		}
		for tag := range tags {
			on[client] = tag
		}
	}
	sort.Strings(split)
	if len(split) > 0 {
		t.Errorf("%s: %d of %d client addresses reached more than one backend: %s", phase, len(split), len(seen), strings.Join(split[:min(8, len(split))], "; "))
	}

	// The instances' own view: which backend each sent each client to.
	sentBy := map[string][]map[string]int{} // client address -> per instance: backend tag -> records
	mismatch := 0
	for _, r := range recs {
		if r.result != "ok" {
			t.Errorf("%s: %s logged client %s with result %s", phase, insts[r.instance].name, r.client, r.result)
			continue
		}
		host, _, _ := net.SplitHostPort(r.client)
		if sentBy[host] == nil {
			sentBy[host] = make([]map[string]int, len(insts))
		}
		per := sentBy[host]
		if per[r.instance] == nil {
			per[r.instance] = map[string]int{}
		}
		per[r.instance][tagOf[r.backend]]++
		if tag, ok := byLocal[r.client]; !ok || tag != tagOf[r.backend] {
			if mismatch++; mismatch <= 5 {
				t.Errorf("%s: %s logged %s -> %s (%s), the client read %q", phase, insts[r.instance].name, r.client, r.backend, tagOf[r.backend], tag)
			}
		}
	}
	if mismatch > 0 {
		t.Errorf("%s: %d access-log records disagree with their client", phase, mismatch)
	}
	allThree := 0
	var disagree []string
	for client := range seen {
		per := sentBy[client]
		if per == nil {
			t.Errorf("%s: no instance logged client %s", phase, client)
			continue
		}
		var views []string
		tags := map[string]bool{}
		took := 0
		for i, m := range per {
			if len(m) > 0 {
				took++
			}
			for tag := range m {
				tags[tag] = true
			}
			views = append(views, fmt.Sprintf("%s %v", insts[i].name, m))
		}
		if took == len(insts) {
			allThree++
		}
		if len(tags) != 1 || !tags[on[client]] {
			disagree = append(disagree, fmt.Sprintf("%s (the client read %v): %s", client, seen[client], strings.Join(views, ", ")))
		}
		// With ~150 connections per client spread at random, a client
		// missing from an instance means the spread did not happen.
		if took < 2 {
			t.Errorf("%s: client %s went through %d instance only: %s", phase, client, took, strings.Join(views, ", "))
		}
	}
	sort.Strings(disagree)
	if len(disagree) > 0 {
		t.Errorf("%s: the instances disagree on %d of %d client addresses: %s", phase, len(disagree), len(seen), strings.Join(disagree[:min(8, len(disagree))], "; "))
	}
	t.Logf("%s: %d client addresses, each on one backend as seen by the clients and by every instance; %d of them went through all %d instances",
		phase, len(seen), allThree, len(insts))
	if t.Failed() {
		t.FailNow()
	}
	return on
}

// ecmpHTTP keeps no connection open: the leak checks count them.
var ecmpHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func ecmpPost(t *testing.T, url string) int {
	t.Helper()
	resp, err := ecmpHTTP.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Logf("POST %s: %d %s", url, resp.StatusCode, body)
	}
	return resp.StatusCode
}

// ecmpSeries names a backend series of pool p as /metrics writes it.
func ecmpSeries(name, backend string) string {
	return fmt.Sprintf(`%s{backend=%q,pool="p"}`, name, backend)
}

// ecmpMetric is one series' value from the instance's /metrics.
func ecmpMetric(in *ecmpInstance, series string) (float64, error) {
	resp, err := ecmpHTTP.Get("http://" + in.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no series %s", series)
}

func ecmpMustMetric(t *testing.T, in *ecmpInstance, series string) float64 {
	t.Helper()
	v, err := ecmpMetric(in, series)
	if err != nil {
		t.Fatalf("%s: %v", in.name, err)
	}
	return v
}

func ecmpWaitMetric(t *testing.T, in *ecmpInstance, series, what string, cond func(float64) bool) {
	t.Helper()
	testnet.Eventually(t, in.name+" "+what+" ("+series+")", func() bool {
		v, err := ecmpMetric(in, series)
		return err == nil && cond(v)
	})
}
