package e2e

// What the tests of backends that come and go share (issue 28:
// discovery_test.go, membership_test.go, discovery_upgrade_test.go): an
// l4lb in front of one pool whose backends DNS (a dnsmasq of the test's
// own) and the admin API name, backends at one port on several loopback
// addresses (a name's A records share the port), and the pool as the
// admin API lists it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// discZone is the zone the tests' dnsmasq answers from its own records.
const discZone = "disc.test"

// lbConfig is the file of an l4lb with one listener in front of pool p,
// written (and written again) at path.
type lbConfig struct {
	path, listen, admin string
	global              string   // lines of [global]
	pool                string   // lines of [pool.p]
	health              string   // lines of [pool.p.health]; "": checks every 100 ms
	discovery           string   // lines of [pool.p.discovery]; "": none
	files               []string // the [[pool.p.backend]] addresses
}

func newLBConfig(t *testing.T) *lbConfig {
	return &lbConfig{path: filepath.Join(t.TempDir(), "l4lb.toml"), listen: testnet.FreeAddr(t), admin: testnet.FreeAddr(t)}
}

// write puts the file in place whole (renamed over the old one), as an
// operator's editor does.
func (c *lbConfig) write(t *testing.T) {
	t.Helper()
	health := c.health
	if health == "" {
		health = "interval = \"100ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[global]\n%s\n[admin]\nlisten = %q\n[log]\nlevel = \"info\"\n", c.global, c.admin)
	fmt.Fprintf(&b, "[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", c.listen)
	fmt.Fprintf(&b, "[pool.p]\n%s\n[pool.p.health]\n%s\n", c.pool, health)
	if c.discovery != "" {
		fmt.Fprintf(&b, "[pool.p.discovery]\n%s\n", c.discovery)
	}
	for _, a := range c.files {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	installBytes(t, []byte(b.String()), c.path, 0o644)
}

// dnsLookup is a [pool.p.discovery] block asking dns for name's A
// records at port, looked up again every 100 ms to 1 s (the records
// live 1 s), with more keys in extra.
func dnsLookup(dns *testnet.ZoneDNS, name string, port int, extra string) string {
	return fmt.Sprintf("dns = \"%s.%s:%d\"\nresolvers = [%q]\nfamily = \"ipv4\"\nmin_refresh = \"100ms\"\nmax_refresh = \"1s\"\n%s",
		name, dns.Zone, port, dns.Addr, extra)
}

// hostsOf is a hosts file naming each of ips name (in discZone).
func hostsOf(name string, ips ...string) string {
	var b strings.Builder
	for _, ip := range ips {
		fmt.Fprintf(&b, "%s %s.%s\n", ip, name, discZone)
	}
	return b.String()
}

// backendsAtOnePort starts a backend on each of ips, all at one port,
// each tagged with its address.
func backendsAtOnePort(t *testing.T, ips ...string) (port int, bs []*testnet.Backend) {
	t.Helper()
	port = testnet.FreePort(t)
	for _, ip := range ips {
		a := net.JoinHostPort(ip, strconv.Itoa(port))
		bs = append(bs, testnet.StartBackend(t, a, a))
	}
	return port, bs
}

// atPort is ip:port.
func atPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

// members is the pool's backends as the admin API lists them, by
// address.
type members map[string]apiBackend

// are reports whether the pool has exactly the backends of want
// (address: source), each usable.
func (m members) are(want map[string]string) bool {
	if len(m) != len(want) {
		return false
	}
	for a, src := range want {
		if b, ok := m[a]; !ok || b.Source != src || !b.Usable || b.Health != "up" {
			return false
		}
	}
	return true
}

func (m members) String() string {
	var out []string
	for a, b := range m {
		out = append(out, fmt.Sprintf("%s(%s,%s,w%d,usable=%v)", a, b.Source, b.Health, b.Weight, b.Usable))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// waitMembers waits until pool p has exactly want (address: source),
// each usable, and returns the list.
func waitMembers(t *testing.T, adminAddr string, want map[string]string) members {
	t.Helper()
	var m members
	if !testnet.WaitUntil(20*time.Second, func() bool {
		m = backends(t, adminAddr, "p")
		return m.are(want)
	}) {
		t.Fatalf("pool p: %v; want %v, each usable", m, want)
	}
	return m
}

// bySource is want for waitMembers: each of addrs from src.
func bySource(src string, addrs ...string) map[string]string {
	out := map[string]string{}
	for _, a := range addrs {
		out[a] = src
	}
	return out
}

// tagsOf connects n clients to listen one after another (from local,
// if not ""), and counts the backends they reached; a client that fails
// fails the test.
func tagsOf(t *testing.T, listen, local string, n int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i := range n {
		tag, err := testnet.Hello(listen, local)
		if err != nil {
			t.Fatalf("client %d of %d: %v (reached so far: %v)", i+1, n, err, out)
		}
		out[tag]++
	}
	return out
}

// openTo connects to listen until a connection reaches the backend
// tagged tag, and returns it (open; the others are closed).
func openTo(t *testing.T, listen, tag string) (net.Conn, *bufio.Reader) {
	t.Helper()
	for range 100 {
		c, err := net.DialTimeout("tcp", listen, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(c)
		line, err := r.ReadString('\n')
		if err == nil && line == tag+"\n" {
			t.Cleanup(func() { c.Close() })
			return c, r
		}
		c.Close()
	}
	t.Fatalf("no connection of 100 reached %s", tag)
	return nil, nil
}

// echoes fails unless the open connection c still relays a line both
// ways.
func echoes(t *testing.T, c net.Conn, r *bufio.Reader, what string) {
	t.Helper()
	msg := "still here " + strconv.FormatInt(time.Now().UnixNano(), 36) + "\n"
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("%s: write: %v", what, err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != msg {
		t.Fatalf("%s: echo %q, %v; want %q", what, line, err, msg)
	}
}

// apiDiscovery is a pool's "discovery" in the admin API's JSON
// (docs/contracts.md).
type apiDiscovery struct {
	Type         string     `json:"type"`
	Name         string     `json:"name"`
	Backends     int        `json:"backends"`
	LastSuccess  *time.Time `json:"last_success"`
	Failing      bool       `json:"failing"`
	FailingSince *time.Time `json:"failing_since"`
	LastError    string     `json:"last_error"`
	EmptySince   *time.Time `json:"empty_since"`
}

// discoveryOf is pool's DNS discovery as GET /api/v1/pools/{pool} shows
// it; nil when the pool has none.
func discoveryOf(t *testing.T, adminAddr, pool string) *apiDiscovery {
	t.Helper()
	resp := e2eutil.AdminGet(t, "http://"+adminAddr+"/api/v1/pools/"+pool)
	defer resp.Body.Close()
	var v struct {
		Discovery *apiDiscovery `json:"discovery"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Discovery
}
