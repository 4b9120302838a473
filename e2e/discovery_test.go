package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// Issue 28, with the real binary and a real DNS server (dnsmasq): the
// backends of pool p are the A records of a name, or the targets of SRV
// records, and follow them.

// startDiscovering writes c and starts l4lb on it, waiting until it
// serves.
func startDiscovering(t *testing.T, c *lbConfig) *proc {
	t.Helper()
	c.write(t)
	l := startL4LB(t, "", nil, "-config", c.path)
	waitServing(t, l, c.listen)
	// The listener is bound before the admin endpoint starts: the tests
	// read the pools through it.
	waitAccepting(t, "l4lb's admin endpoint", l, c.admin)
	return l
}

// An address added to the name gets clients once its health check
// passes, and none while it fails; an address removed gets no new
// client, while a connection open to it goes on until the client closes
// it.
func TestDiscoveryFollowsTheName(t *testing.T) {
	port, be := backendsAtOnePort(t, "127.0.0.2", "127.0.0.3")
	a2, a3, a4 := be[0].Addr, be[1].Addr, atPort("127.0.0.4", port) // nothing listens at a4 yet
	dns := testnet.StartZoneDNS(t, "127.0.56.1", "10.56.0.1", discZone, hostsOf("web", "127.0.0.2"))
	c := newLBConfig(t)
	// retries = 0: a client sent to a backend that refuses fails, so a
	// client to a4 before its check passes would show.
	c.pool = "algorithm = \"round-robin\"\nretries = 0\n"
	c.discovery = dnsLookup(dns, "web", port, "")
	startDiscovering(t, c)
	waitMembers(t, c.admin, bySource("dns", a2))
	if got := tagsOf(t, c.listen, "", 10); got[a2] != 10 {
		t.Fatalf("clients reached %v; want all of them %s", got, a2)
	}

	dns.WriteHosts(t, hostsOf("web", "127.0.0.2", "127.0.0.3", "127.0.0.4"))
	dns.Reload(t)
	testnet.Eventually(t, "the pool to list the three addresses, a3 checked up and a4 down", func() bool {
		m := backends(t, c.admin, "p")
		return len(m) == 3 && m[a3].Usable && m[a3].Health == "up" && m[a4].Source == "dns" && m[a4].Health == "down"
	})
	got := tagsOf(t, c.listen, "", 40)
	if got[a2]+got[a3] != 40 || got[a3] == 0 {
		t.Fatalf("clients reached %v; want a2 and a3, none to a4 (its checks fail)", got)
	}

	testnet.StartBackend(t, a4, a4)
	testnet.Eventually(t, "a client to reach a4 once its check passes", func() bool {
		tag, err := testnet.Hello(c.listen, "")
		return err == nil && tag == a4
	})

	conn, r := openTo(t, c.listen, a3)
	dns.WriteHosts(t, hostsOf("web", "127.0.0.2", "127.0.0.4"))
	dns.Reload(t)
	waitMembers(t, c.admin, bySource("dns", a2, a4))
	if got := tagsOf(t, c.listen, "", 40); got[a3] != 0 {
		t.Fatalf("clients reached %v after a3 left the name; want none to a3", got)
	}
	echoes(t, conn, r, "the connection open to a3 after it left")
	if n := e2eutil.Metric(t, c.admin, `l4lb_discovery_backends{pool="p"}`); n != 2 {
		t.Fatalf("l4lb_discovery_backends %v, want 2", n)
	}
}

// srvRecord is a dnsmasq option for an SRV record of _web._tcp in the
// zone: target (a name in the zone), port, priority 0, weight.
func srvRecord(target string, port, weight int) string {
	return fmt.Sprintf("--srv-host=_web._tcp.%s,%s.%s,%d,0,%d", discZone, target, discZone, port, weight)
}

// SRV weights 1 and 3 split 400 clients of weighted round robin 1:3;
// the weights turned around, the split follows.
func TestDiscoverySRVWeights(t *testing.T) {
	t1, t2 := testnet.StartBackend(t, "t1", "127.0.0.2:0"), testnet.StartBackend(t, "t2", "127.0.0.3:0")
	_, p1, _ := strings.Cut(t1.Addr, ":")
	_, p2, _ := strings.Cut(t2.Addr, ":")
	var port1, port2 int
	fmt.Sscan(p1, &port1)
	fmt.Sscan(p2, &port2)
	hosts := "127.0.0.2 t1." + discZone + "\n127.0.0.3 t2." + discZone + "\n"
	dns := testnet.StartZoneDNS(t, "127.0.56.1", "10.56.0.1", discZone, hosts, srvRecord("t1", port1, 1), srvRecord("t2", port2, 3))
	c := newLBConfig(t)
	c.pool = "algorithm = \"weighted-round-robin\"\n"
	c.discovery = fmt.Sprintf("srv = \"_web._tcp.%s\"\nresolvers = [%q]\nfamily = \"ipv4\"\nmin_refresh = \"100ms\"\nmax_refresh = \"1s\"\n", discZone, dns.Addr)
	startDiscovering(t, c)

	split := func(w1, w2 int) {
		t.Helper()
		m := waitMembers(t, c.admin, bySource("dns", t1.Addr, t2.Addr))
		testnet.Eventually(t, fmt.Sprintf("the weights %d and %d", w1, w2), func() bool {
			m = backends(t, c.admin, "p")
			return m[t1.Addr].Weight == w1 && m[t2.Addr].Weight == w2
		})
		got := tagsOf(t, c.listen, "", 400)
		want1 := 400 * w1 / (w1 + w2)
		t.Logf("SRV weights %d:%d: 400 clients split t1 %d, t2 %d", w1, w2, got["t1"], got["t2"])
		if got["t1"]+got["t2"] != 400 || got["t1"] < want1-20 || got["t1"] > want1+20 {
			t.Fatalf("SRV weights %d:%d: 400 clients split %v; want about %d to t1", w1, w2, got, want1)
		}
	}
	split(1, 3)
	dns.RestartRecords(t, srvRecord("t1", port1, 3), srvRecord("t2", port2, 1))
	split(3, 1)
}

// lookups is how many of pool p's lookups ended with each of results.
func lookups(t *testing.T, adminAddr string, results ...string) float64 {
	t.Helper()
	var n float64
	for _, r := range results {
		n += e2eutil.Metric(t, adminAddr, fmt.Sprintf(`l4lb_discovery_lookups_total{pool="p",result=%q}`, r))
	}
	return n
}

// The resolver stopped: the last set is kept and serves, the failures
// are counted. The name gone (NXDOMAIN): the set stays for empty_grace,
// then empties.
func TestDiscoveryKeepsTheLastSet(t *testing.T) {
	port, be := backendsAtOnePort(t, "127.0.0.2", "127.0.0.3")
	dns := testnet.StartZoneDNS(t, "127.0.56.1", "10.56.0.1", discZone, hostsOf("web", "127.0.0.2", "127.0.0.3"))
	c := newLBConfig(t)
	c.pool = "algorithm = \"round-robin\"\n"
	const grace = 2 * time.Second
	c.discovery = dnsLookup(dns, "web", port, fmt.Sprintf("timeout = \"200ms\"\nempty_grace = %q\n", grace.String()))
	startDiscovering(t, c)
	both := bySource("dns", be[0].Addr, be[1].Addr)
	waitMembers(t, c.admin, both)
	if d := discoveryOf(t, c.admin, "p"); d == nil || d.Type != "dns" || d.Name != fmt.Sprintf("web.%s:%d", dns.Zone, port) ||
		d.Backends != 2 || d.LastSuccess == nil || d.Failing || d.FailingSince != nil || d.EmptySince != nil {
		t.Fatalf("the pools JSON shows the discovery as %+v; want dns web.%s:%d, 2 backends, a last success, not failing", d, dns.Zone, port)
	}

	failed := lookups(t, c.admin, "timeout", "error")
	dns.Kill()
	testnet.Eventually(t, "failed lookups to be counted", func() bool { return lookups(t, c.admin, "timeout", "error") >= failed+3 })
	if m := members(backends(t, c.admin, "p")); !m.are(both) {
		t.Fatalf("after failed lookups the pool has %v; want the last set kept", m)
	}
	// The backends alone look as before: the JSON says that DNS fails.
	if d := discoveryOf(t, c.admin, "p"); d == nil || !d.Failing || d.FailingSince == nil || d.LastError == "" || d.Backends != 2 {
		t.Fatalf("with the resolver stopped the discovery shows %+v; want failing, since when, the error, the 2 backends kept", d)
	}
	if got := tagsOf(t, c.listen, "", 20); got[be[0].Addr] == 0 || got[be[1].Addr] == 0 {
		t.Fatalf("with the resolver stopped clients reached %v; want both backends", got)
	}

	dns.Restart(t)
	ok := lookups(t, c.admin, "ok")
	testnet.Eventually(t, "lookups to succeed again", func() bool { return lookups(t, c.admin, "ok") > ok })
	if d := discoveryOf(t, c.admin, "p"); d == nil || d.Failing || d.FailingSince != nil || d.LastError == "" {
		t.Fatalf("after the resolver came back the discovery shows %+v; want not failing, the last error kept", d)
	}

	dns.WriteHosts(t, hostsOf("other", "127.0.0.9"))
	removed := time.Now()
	dns.Reload(t)
	testnet.Eventually(t, "an NXDOMAIN lookup", func() bool { return lookups(t, c.admin, "nxdomain") >= 1 })
	if m := members(backends(t, c.admin, "p")); !m.are(both) {
		t.Fatalf("at the first NXDOMAIN the pool has %v; want the set kept for empty_grace", m)
	}
	if d := discoveryOf(t, c.admin, "p"); d == nil || d.EmptySince == nil || d.Backends != 2 {
		t.Fatalf("in the grace the discovery shows %+v; want empty since the NXDOMAIN, the 2 backends kept", d)
	}
	if got := tagsOf(t, c.listen, "", 10); got[be[0].Addr]+got[be[1].Addr] != 10 {
		t.Fatalf("in the grace clients reached %v", got)
	}
	testnet.Eventually(t, "the set to empty after the grace", func() bool { return len(backends(t, c.admin, "p")) == 0 })
	if took := time.Since(removed); took < grace {
		t.Fatalf("the set emptied %v after the name was removed; want no sooner than empty_grace (%v)", took, grace)
	}
	if n := e2eutil.Metric(t, c.admin, `l4lb_discovery_backends{pool="p"}`); n != 0 {
		t.Fatalf("l4lb_discovery_backends %v after the grace, want 0", n)
	}
	if d := discoveryOf(t, c.admin, "p"); d == nil || d.Backends != 0 {
		t.Fatalf("after the grace the discovery shows %+v; want 0 backends", d)
	}
}

// A name with more A records than a 512-byte UDP answer holds: dnsmasq
// truncates (TC), l4lb asks again over TCP and has them all.
func TestDiscoveryTruncatedAnswerOverTCP(t *testing.T) {
	const n = 60
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.1.%d", i+1)
	}
	dns := testnet.StartZoneDNS(t, "127.0.56.1", "10.56.0.1", discZone, hostsOf("big", ips...), "--edns-packet-max=512")
	host, dnsPort, _ := strings.Cut(dns.Addr, ":")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// As l4lb asks: over UDP with a 1232-byte EDNS0 buffer.
	out, err := exec.CommandContext(ctx, "dig", "@"+host, "-p", dnsPort, "+notcp", "+ignore", "+bufsize=1232", "big."+discZone, "A").CombinedOutput()
	if err != nil || !strings.Contains(string(out), " tc ") {
		t.Fatalf("dig over UDP: %v; want a truncated answer (flag tc):\n%s", err, out)
	}
	port := testnet.FreePort(t) // nothing listens: the test is of the list
	c := newLBConfig(t)
	c.pool = "algorithm = \"round-robin\"\n"
	c.health = "enabled = false\n"
	c.discovery = dnsLookup(dns, "big", port, "")
	startDiscovering(t, c)
	want := map[string]string{}
	for _, ip := range ips {
		want[atPort(ip, port)] = "dns"
	}
	waitMembers(t, c.admin, want)
}

// With its resolver down at start, l4lb starts all the same, the pool
// empty (clients get what an all-down pool gives), and fills when DNS
// answers.
func TestDiscoveryStartsEmptyWithoutDNS(t *testing.T) {
	port, be := backendsAtOnePort(t, "127.0.0.2")
	dns := testnet.StartZoneDNS(t, "127.0.56.1", "10.56.0.1", discZone, hostsOf("web", "127.0.0.2"))
	dns.Kill()
	c := newLBConfig(t)
	c.pool = "algorithm = \"round-robin\"\n"
	c.discovery = dnsLookup(dns, "web", port, "timeout = \"200ms\"\n")
	startDiscovering(t, c)
	if m := backends(t, c.admin, "p"); len(m) != 0 {
		t.Fatalf("with no resolver the pool has %v; want it empty", members(m))
	}
	if tag, err := testnet.Hello(c.listen, ""); err == nil {
		t.Fatalf("a client of the empty pool reached %q; want it closed", tag)
	}
	dns.Restart(t)
	waitMembers(t, c.admin, bySource("dns", be[0].Addr))
	if got := tagsOf(t, c.listen, "", 5); got[be[0].Addr] != 5 {
		t.Fatalf("clients reached %v once DNS answered", got)
	}
}
