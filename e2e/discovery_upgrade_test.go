package e2e

import (
	"testing"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// An upgrade of an l4lb whose backends DNS names, with a connection open
// to one: the connection is handed over and goes on, the new process
// serves the discovered backends at once (from the old process's sets:
// its own first lookups find no resolver), then follows DNS on its own.
func TestUpgradeKeepsDiscoveredBackends(t *testing.T) {
	port, be := backendsAtOnePort(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	dns := testnet.StartZoneDNS(t, "127.0.58.1", "10.58.0.1", discZone, hostsOf("web", "127.0.0.2", "127.0.0.3"))
	c := newLBConfig(t)
	c.pool = "algorithm = \"round-robin\"\n"
	c.discovery = dnsLookup(dns, "web", port, "timeout = \"200ms\"\n")
	c.write(t)
	chain := startChain(t, l4lbBin, c.path)
	both := bySource("dns", be[0].Addr, be[1].Addr)
	waitMembers(t, c.admin, both)
	conn, r := openTo(t, c.listen, be[1].Addr)

	dns.Kill()
	failed := lookups(t, c.admin, "timeout", "error")
	testnet.Eventually(t, "a failed lookup", func() bool { return lookups(t, c.admin, "timeout", "error") > failed })
	chain.upgrade(t)
	if m := members(backends(t, c.admin, "p")); !m.are(both) {
		t.Fatalf("the new process, its resolver down, lists %v; want the old process's set %v", m, both)
	}
	if n := e2eutil.Metric(t, c.admin, `l4lb_discovery_lookups_total{pool="p",result="ok"}`); n != 0 {
		t.Fatalf("the new process counts %v successful lookups with its resolver down", n)
	}
	// Its own lookups fail: it keeps the set it was handed.
	testnet.Eventually(t, "the new process's failed lookups", func() bool { return lookups(t, c.admin, "timeout", "error") >= 2 })
	if m := members(backends(t, c.admin, "p")); !m.are(both) {
		t.Fatalf("after failed lookups the new process lists %v; want the old process's set %v kept", m, both)
	}
	if got := tagsOf(t, c.listen, "", 10); got[be[0].Addr] == 0 || got[be[1].Addr] == 0 {
		t.Fatalf("after the upgrade clients reached %v; want both discovered backends", got)
	}
	echoes(t, conn, r, "the connection open across the upgrade")
	// A change of another source rebuilds the pool from what this
	// process holds: the handed-over set is still in it.
	api := testnet.StartBackend(t, "api", "")
	if code, body := adminCall(t, "POST", "http://"+c.admin+"/api/v1/pools/p/backends", `{"addr":"`+api.Addr+`"}`); code != 200 && code != 201 {
		t.Fatalf("add %s: %d %s", api.Addr, code, body)
	}
	waitMembers(t, c.admin, map[string]string{be[0].Addr: "dns", be[1].Addr: "dns", api.Addr: "api"})
	if n := loggedCounts(chain.logText(), logAdopted); len(n) != 1 || n[0][0] != 1 {
		t.Fatalf("the new process adopted relays %v; want the one open connection", n)
	}

	dns.WriteHosts(t, hostsOf("web", "127.0.0.2", "127.0.0.4"))
	dns.Restart(t)
	waitMembers(t, c.admin, map[string]string{be[0].Addr: "dns", be[2].Addr: "dns", api.Addr: "api"})
	echoes(t, conn, r, "the handed-over connection after its backend left the name")
}
