package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The trip quorum ([cluster] trip_quorum = 2) across three real l4lb
// processes sharing one Redis, two echo backends b1 and b2. Each instance
// runs in a network namespace of its own, joined to the others by a
// bridge; its path to b1 is broken by an nft drop rule in its own
// namespace (its SYNs to b1 go nowhere). The first instance whose path is
// broken trips b1 for itself alone (its clients go to b2) while the other
// two keep sending clients to b1; once a second instance's path is broken
// too, b1 is out for the fleet, the third instance included, whose own
// path to it works.
//
// The test binary re-runs itself in a namespace of the test's own (the
// hub: the bridge, Redis, the backends and the clients), which makes the
// instances' three.

const fleetQuorumEnv = "L4LB_FLEET_QUORUM_CHILD"

func TestFleetTripQuorumKeepsOneInstancesTripLocal(t *testing.T) {
	testnet.RequireNetns(t) // a headline of the quorum: it never skips silently
	testnet.RunInNetns(t, fleetQuorumEnv, "TestFleetQuorumChild", 3*time.Minute)
}

// The hub's address on the bridge, and the instances' (10.88.0.11-13).
const quorumHub = "10.88.0.1"

// quorumNamespaces makes the bridge in this (the hub's) namespace and one
// namespace per instance linked to it, removed when the test ends; it
// returns their names.
func quorumNamespaces(t *testing.T) [3]string {
	t.Helper()
	fleetRun(t, "ip", "link", "add", "l4lbq", "type", "bridge")
	fleetRun(t, "ip", "addr", "add", quorumHub+"/24", "dev", "l4lbq")
	fleetRun(t, "ip", "link", "set", "l4lbq", "up")
	var names [3]string
	for i := range names {
		ns := fmt.Sprintf("l4lbq-%d-%d", os.Getpid(), i)
		fleetRun(t, "ip", "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
			}
		})
		hub, inner := fmt.Sprintf("l4lbq%dh", i), fmt.Sprintf("l4lbq%dn", i)
		fleetRun(t, "ip", "link", "add", hub, "type", "veth", "peer", "name", inner)
		fleetRun(t, "ip", "link", "set", inner, "netns", ns)
		fleetRun(t, "ip", "link", "set", hub, "master", "l4lbq", "up")
		fleetRun(t, "ip", "-n", ns, "addr", "add", quorumAddr(i)+"/24", "dev", inner)
		fleetRun(t, "ip", "-n", ns, "link", "set", inner, "up")
		fleetRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
		names[i] = ns
	}
	return names
}

func quorumAddr(i int) string { return fmt.Sprintf("10.88.0.%d", 11+i) }

func TestFleetQuorumChild(t *testing.T) {
	if os.Getenv(fleetQuorumEnv) == "" {
		t.Skip("run by TestFleetTripQuorumKeepsOneInstancesTripLocal inside its namespace")
	}
	testnet.CheckLeaks(t)
	ns := quorumNamespaces(t)
	// Beside 127.0.0.1, which the test's own connection uses, the hub's
	// address on the bridge: the instances' way to Redis.
	srv := testnet.StartRedis(t, "--bind", "127.0.0.1", quorumHub)
	_, redisPort, _ := net.SplitHostPort(srv.Addr)
	redisURL := "redis://" + net.JoinHostPort(quorumHub, redisPort)
	b1 := testnet.StartBackend(t, "b1", quorumHub+":0")
	b2 := testnet.StartBackend(t, "b2", quorumHub+":0")
	port1 := b1.Addr[strings.LastIndex(b1.Addr, ":")+1:]

	dir := t.TempDir()
	// A dropped SYN fails its dial after connect_timeout, and the client
	// is retried on the other backend: no client of any instance fails.
	// A minute's window and cooldown: both trips fall in one window, and
	// no probe runs during the test.
	poolKeys := "retries = 1\nconnect_timeout = \"300ms\""
	breakerKeys := "failures = 3\nwindow = \"60s\"\ncooldown = \"60s\"\nmax_cooldown = \"60s\""
	var in [3]*fleetInstance
	for i, name := range []string{"quorum-a", "quorum-b", "quorum-c"} {
		run := func(path string) *proc {
			return startL4LB(t, "ip", nil, "netns", "exec", ns[i], l4lbBin, "-config", path)
		}
		in[i] = startFleetInstanceWith(t, dir, name, quorumAddr(i), run, func(listen, admin string) string {
			text := fleetConfigText(redisURL, name, listen, admin, []string{b1.Addr, b2.Addr}, poolKeys, breakerKeys)
			return strings.Replace(text, "[admin]", "trip_quorum = 2\n[admin]", 1)
		})
	}
	a, b, c := in[0], in[1], in[2]
	openS, localS := fleetSeries("l4lb_breaker_open", b1.Addr), fleetSeries("l4lb_breaker_local_only", b1.Addr)

	// breakPath drops instance i's SYNs to b1, in its own namespace.
	breakPath := func(i int) {
		nft := func(cmd string) {
			fleetRun(t, "ip", append([]string{"netns", "exec", ns[i], "nft"}, strings.Fields(cmd)...)...)
		}
		nft("add table inet l4lbq")
		nft("add chain inet l4lbq out { type filter hook output priority 0 ; }")
		nft("add rule inet l4lbq out ip daddr " + quorumHub + " tcp dport " + port1 + " tcp flags & (syn|ack) == syn drop")
	}
	// tripOn sends in's clients until its breaker of b1 is open; every
	// client is served (by b2 when b1's dial fails).
	tripOn := func(in *fleetInstance) {
		t.Helper()
		for i := 0; in.mustMetric(t, openS) != 1; i++ {
			if i == 50 {
				t.Fatalf("instance %s did not trip b1 after 50 clients", in.name)
			}
			if tag, err := fleetTag(in.listen); err != nil || (tag != "b1" && tag != "b2") {
				t.Fatalf("a client of %s: %q %v, want a backend's tag", in.name, tag, err)
			}
		}
	}
	// reaches counts which backends n clients of in reached.
	reaches := func(in *fleetInstance, n int) map[string]int {
		t.Helper()
		got := map[string]int{}
		for range n {
			tag, err := fleetTag(in.listen)
			if err != nil {
				t.Fatalf("a client of %s: %v", in.name, err)
			}
			got[tag]++
		}
		return got
	}
	redisOpen := func() bool {
		_, o := fleetRedisGen(t, srv, b1.Addr)
		return o != "(nil)" && o != ""
	}

	// One instance's path broken: its trip is its own.
	breakPath(0)
	tripOn(a)
	if v := a.mustMetric(t, localS); v != 1 {
		t.Fatalf("a's l4lb_breaker_local_only of b1 is %v after its trip below the quorum, want 1", v)
	}
	if !quorumPoolsLocalOnly(t, a, b1.Addr) {
		t.Fatal("a's pools JSON does not show b1's breaker open on a alone (breaker.local_only)")
	}
	if redisOpen() {
		g, o := fleetRedisGen(t, srv, b1.Addr)
		t.Fatalf("Redis holds b1 open (gen %q, open %q) after one instance's trip", g, o)
	}
	if got := reaches(a, 6); got["b1"] != 0 || got["b2"] != 6 {
		t.Fatalf("a's clients after its own trip reached %v, want b2 only", got)
	}
	for _, o := range []*fleetInstance{b, c} {
		if v := o.mustMetric(t, openS); v != 0 {
			t.Fatalf("instance %s has b1's breaker open (%v) on a's trip below the quorum", o.name, v)
		}
		if got := reaches(o, 10); got["b1"] == 0 {
			t.Fatalf("clients of %s reached %v: none reached b1, which a's trip alone must not take away", o.name, got)
		}
	}
	t.Logf("one path broken: a open alone, b and c serve b1; Redis closed")

	// A second instance's path broken: the quorum is reached, b1 is out
	// for all three.
	breakPath(1)
	tripOn(b)
	testnet.Eventually(t, "Redis to hold b1 open", redisOpen)
	for _, o := range in {
		o.waitMetric(t, openS, "to follow the fleet's open of b1", func(v float64) bool { return v == 1 })
		if v := o.mustMetric(t, localS); v != 0 {
			t.Fatalf("instance %s shows b1 open alone (%v) beside the fleet's open", o.name, v)
		}
	}
	if got := reaches(c, 10); got["b1"] != 0 {
		t.Fatalf("clients of c reached %v: b1 is out for the fleet, c's working path included", got)
	}
	g, o := fleetRedisGen(t, srv, b1.Addr)
	t.Logf("two paths broken: b1 out for the fleet (Redis gen %s, open %q); c's clients all on b2", g, o)
}

// quorumPoolsLocalOnly reads in's pools JSON: whether backend addr's
// breaker shows open on this instance alone.
func quorumPoolsLocalOnly(t *testing.T, in *fleetInstance, addr string) bool {
	t.Helper()
	resp, err := fleetHTTP.Get("http://" + in.admin + "/api/v1/pools")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Pools []struct {
			Backends []struct {
				Addr    string `json:"addr"`
				Breaker struct {
					State     string `json:"state"`
					LocalOnly bool   `json:"local_only"`
				} `json:"breaker"`
			} `json:"backends"`
		} `json:"pools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("pools JSON of %s: %v", in.name, err)
	}
	for _, p := range body.Pools {
		for _, be := range p.Backends {
			if be.Addr == addr {
				return be.Breaker.State == "open" && be.Breaker.LocalOnly
			}
		}
	}
	t.Fatalf("pools JSON of %s has no backend %s", in.name, addr)
	return false
}
