package main

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
)

// The property these tests hold check to: every configuration check
// accepts also starts, that is, run builds its pools and binds every
// listener and the admin endpoint when the ports are free. Configurations
// name their ports {P0}, {P1}, {P2}; each run of a case gets ports free
// on both wildcard addresses, so that the binds collide with each other as
// the file says and with nothing else.

// freePorts returns n distinct FreePorts: free on both wildcard
// addresses, for TCP and UDP.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	ports := make([]string, n)
	for i := range ports {
		ports[i] = fmt.Sprint(testnet.FreePort(t))
	}
	return ports
}

// withPorts replaces {P0}, {P1}, ... in src by ports.
func withPorts(src string, ports []string) string {
	for i, p := range ports {
		src = strings.ReplaceAll(src, fmt.Sprintf("{P%d}", i), p)
	}
	return src
}

// checkAccepts is the check path of "l4lb check" on src: parse, then
// build as run would.
func checkAccepts(src string) (*config.Config, error) {
	cfg, err := config.Parse("t.toml", []byte(src))
	if err != nil {
		return nil, err
	}
	return cfg, checkBuild(cfg)
}

// mustStart builds cfg's pools and binds its sockets as run does (TCP and
// UDP listeners through pkg/listener, the same path server.New takes, then
// the admin endpoint on exactly its address), failing when any of it fails.
func mustStart(t testing.TB, cfg *config.Config, src string) {
	t.Helper()
	if _, err := server.BuildPools(cfg, pool.Deps{Store: breaker.NewMemoryStore(nil)}, nil, nil); err != nil {
		t.Fatalf("check accepted a file whose pools do not build: %v\n%s", err, src)
	}
	var open []io.Closer
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for _, l := range cfg.Listeners {
		if l.Protocol == config.ProtocolUDP {
			socks, err := listener.BindUDP(l.Name, l.Bind, 2)
			if err != nil {
				t.Fatalf("check accepted a file run cannot serve: %v\n%s", err, src)
			}
			open = append(open, closerFunc(socks.Close))
			continue
		}
		socks, err := listener.Bind(l.Name, l.Bind, l.Backlog, 2)
		if err != nil {
			t.Fatalf("check accepted a file run cannot serve: %v\n%s", err, src)
		}
		open = append(open, closerFunc(socks.Close))
	}
	if cfg.Admin.Listen != "" {
		network := "tcp6"
		if netip.MustParseAddrPort(cfg.Admin.Listen).Addr().Unmap().Is4() {
			network = "tcp4"
		}
		ln, err := net.Listen(network, cfg.Admin.Listen)
		if err != nil {
			t.Fatalf("check accepted a file whose admin endpoint cannot bind: %v\n%s", err, src)
		}
		open = append(open, ln)
	}
}

func TestCheckedConfigsStart(t *testing.T) {
	testnet.CheckLeaks(t) // built pools never ran: nothing may be left
	ref, err := os.ReadFile("../../config.toml")
	if err != nil {
		t.Fatal(err)
	}
	reference := strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:{P0}", "127.0.0.1:9090", "127.0.0.1:{P1}", "127.0.0.1:8081", "127.0.0.1:{P2}").Replace(string(ref))
	backend := "addr = \"127.0.0.1:9\"\n"
	// A TCP and a UDP listener on one address and port, a UDP wildcard
	// beside a specific address (refused), and UDP beside the admin
	// endpoint.
	both := onePool([]string{"127.0.0.1:{P0}"}, "", backend) +
		"[[listener]]\nname = \"u\"\nbind = \"%s\"\nprotocol = \"udp\"\npool = \"q\"\n[pool.q]\n[[pool.q.backend]]\naddr = \"127.0.0.1:9\"\n"
	udpPair := "[admin]\nlisten = \"\"\n[[listener]]\nname = \"a\"\nbind = \"%s\"\nprotocol = \"udp\"\npool = \"q\"\n" +
		"[[listener]]\nname = \"b\"\nbind = \"%s\"\nprotocol = \"udp\"\npool = \"q\"\n[pool.q]\n[[pool.q.backend]]\naddr = \"127.0.0.1:9\"\n"
	tests := []struct {
		name string
		src  string
		ok   bool // what check says
		ipv6 bool // needs IPv6
	}{
		{"the reference config", reference, true, false},
		{"two IPv4 addresses on one port", onePool([]string{"127.0.0.1:{P0}", "127.0.0.2:{P0}"}, "", backend), true, false},
		{"IPv4-mapped beside another IPv4 address", onePool([]string{"[::ffff:127.0.0.1]:{P0}", "127.0.0.2:{P0}"}, "", backend), true, false},
		{"both wildcards on one port", onePool([]string{"0.0.0.0:{P0}", "[::]:{P0}"}, "", backend), true, true},
		{"IPv6 wildcard beside IPv4 loopback", onePool([]string{"[::]:{P0}", "127.0.0.1:{P0}"}, "", backend), true, true},
		{"IPv4 wildcard beside IPv6 loopback", onePool([]string{"0.0.0.0:{P0}", "[::1]:{P0}"}, "", backend), true, true},
		{"admin on the other family's wildcard", strings.Replace(onePool([]string{"[::]:{P1}"}, "", backend), `listen = ""`, `listen = "0.0.0.0:{P1}"`, 1), true, true},
		{"wildcard beside a specific address", onePool([]string{"0.0.0.0:{P0}", "127.0.0.1:{P0}"}, "", backend), false, false},
		{"IPv6 wildcard beside IPv6 loopback", onePool([]string{"[::1]:{P0}", "[::]:{P0}"}, "", backend), false, true},
		{"admin under a listener's wildcard", strings.Replace(onePool([]string{"0.0.0.0:{P1}"}, "", backend), `listen = ""`, `listen = "127.0.0.1:{P1}"`, 1), false, false},
		{"tcp and udp on one address", fmt.Sprintf(both, "127.0.0.1:{P0}"), true, false},
		{"udp wildcard beside tcp on its port", fmt.Sprintf(both, "0.0.0.0:{P0}"), true, false},
		{"udp on the admin endpoint's address", strings.Replace(fmt.Sprintf(both, "127.0.0.1:{P1}"), `listen = ""`, `listen = "127.0.0.1:{P1}"`, 1), true, false},
		{"both udp wildcards", fmt.Sprintf(udpPair, "0.0.0.0:{P0}", "[::]:{P0}"), true, true},
		{"udp wildcard beside a specific udp address", fmt.Sprintf(udpPair, "0.0.0.0:{P0}", "127.0.0.1:{P0}"), false, false},
		{"two udp listeners on one address", fmt.Sprintf(udpPair, "127.0.0.1:{P0}", "127.0.0.1:{P0}"), false, false},
		{"ring too large", onePool([]string{"127.0.0.1:{P0}"}, "algorithm = \"consistent-hash\"\nring_vnodes = 10000\n", "addr = \"127.0.0.1:1\"\nweight = 256\n", "addr = \"127.0.0.1:2\"\nweight = 256\n"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ipv6 && !testnet.HasIPv6() {
				t.Skip("no IPv6 here")
			}
			src := withPorts(tt.src, freePorts(t, 3))
			cfg, err := checkAccepts(src)
			if (err == nil) != tt.ok {
				t.Fatalf("check: %v, want ok=%v\n%s", err, tt.ok, src)
			}
			if err == nil {
				mustStart(t, cfg, src)
			}
		})
	}
}

// TestBuildPoolsReportsWhatOnlyThePoolSees: a problem only pool.New finds
// (here a ring too large, in a Config built in code, which Parse never
// saw) comes out located at its pool, as an invalid configuration.
func TestBuildPoolsReportsWhatOnlyThePoolSees(t *testing.T) {
	p := config.DefaultPool("p")
	p.Algorithm = config.AlgorithmConsistentHash
	p.RingVnodes = config.MaxRingVnodes
	p.Backends = []config.Backend{{Addr: "127.0.0.1:1", Weight: 256}, {Addr: "127.0.0.1:2", Weight: 256}}
	cfg := &config.Config{Admin: config.Admin{}, Pools: map[string]*config.Pool{"p": p}, PoolNames: []string{"p"}}
	_, err := server.BuildPools(cfg, pool.Deps{Store: breaker.NewMemoryStore(nil)}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pool.p: run cannot build this pool:") || !strings.Contains(err.Error(), "ring too large") {
		t.Fatalf("server.BuildPools = %v, want the ring refused at pool.p", err)
	}
}

// FuzzCheckThenStart generates configurations from the fuzzer's bytes
// (binds that may collide, backends that may be l4lb itself, broadcast or
// invalid, weights that may all be 0, rings that may be too large) and
// holds every one check accepts to starting.
func FuzzCheckThenStart(f *testing.F) {
	for _, seed := range [][]byte{
		// Accepted (with IPv6): the defaults; admin on a wildcard; both
		// wildcards on one port; IPv4-mapped beside another IPv4 address.
		{},
		{2, 0, 0, 0, 2, 0, 1, 1, 0},
		{0, 1, 1, 0, 0, 4, 0, 1, 7, 0, 0, 1, 2, 0, 0, 1, 1, 1, 6, 2, 0, 0, 0, 0, 0},
		{2, 2, 5, 1, 0, 3, 0, 1, 2, 0, 0, 4, 0, 2, 2, 6, 0, 2, 0, 3, 1, 1, 2, 0, 1, 0, 0, 0, 0, 0, 0},
		// Refused: colliding binds; the admin endpoint as a backend.
		{1, 2, 0, 0, 4, 1, 0, 1, 6, 2, 2, 1, 0, 1, 1, 2},
		{2, 3, 2, 1, 1, 0, 0, 2, 7, 0, 2, 0, 2, 0, 2},
		// Accepted: a TCP and a UDP listener on one address and port, each
		// with its pool.
		{0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		// Refused: one pool for a TCP and a UDP listener.
		{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
	} {
		f.Add(seed)
	}
	host := ""
	if h, err := server.ThisHost(); err == nil {
		for _, p := range h.Addrs {
			if a := p.Addr(); a.Is4() && !a.IsLoopback() {
				host = a.String()
				break
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := generateConfig(&choices{data: data}, freePorts(t, 3), testnet.HasIPv6(), host)
		if cfg, err := checkAccepts(src); err == nil {
			mustStart(t, cfg, src)
		}
	})
}

// choices reads small decisions from fuzz input; past its end every
// decision is the first option.
type choices struct {
	data []byte
	i    int
}

func (c *choices) of(n int) int {
	if c.i >= len(c.data) {
		return 0
	}
	c.i++
	return int(c.data[c.i-1]) % n
}

func (c *choices) pick(options []string) string { return options[c.of(len(options))] }

// generateConfig writes a file of 1 to 3 listeners (TCP or UDP) over pools
// a and b from c's decisions, on ports, with IPv6 addresses when ipv6, and host (a
// non-loopback address of this machine, or "") among the addresses.
func generateConfig(c *choices, ports []string, ipv6 bool, host string) string {
	listenHosts := []string{"127.0.0.1", "0.0.0.0", "127.0.0.2", "[::ffff:127.0.0.1]"}
	backendHosts := []string{"127.0.0.1", "10.0.0.1", "127.0.0.2", "0.0.0.0", "255.255.255.255", "300.1.2.3"}
	admins := []string{"", "127.0.0.1:" + ports[0], "0.0.0.0:" + ports[1], "127.0.0.1:" + ports[2]}
	if ipv6 {
		listenHosts = append(listenHosts, "[::]", "[::1]")
		backendHosts = append(backendHosts, "[::1]")
		admins = append(admins, "[::1]:"+ports[2])
	}
	if host != "" {
		listenHosts = append(listenHosts, host)
		backendHosts = append(backendHosts, host)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = %q\n", c.pick(admins))
	var listeners []string
	for i := range 1 + c.of(3) {
		listeners = append(listeners, fmt.Sprintf("[[listener]]\nname = \"l%d\"\nbind = \"%s:%s\"\npool = %q\n", i, c.pick(listenHosts), c.pick(ports), c.pick([]string{"a", "b"})))
	}
	var pools strings.Builder
	for _, name := range []string{"a", "b"} {
		fmt.Fprintf(&pools, "[pool.%s]\nalgorithm = %q\nring_vnodes = %s\nmaglev_table_size = %s\n", name,
			c.pick(config.Algorithms()), c.pick([]string{"160", "1", "10000"}), c.pick([]string{"65537", "2", "251"}))
		for range 1 + c.of(3) {
			fmt.Fprintf(&pools, "[[pool.%s.backend]]\naddr = \"%s:%s\"\nweight = %s\n", name,
				c.pick(backendHosts), c.pick(append([]string{"9"}, ports...)), c.pick([]string{"1", "0", "256"}))
		}
	}
	// Protocols are chosen last, so inputs written before UDP existed
	// (all past their end: tcp) still make the files they made.
	for _, l := range listeners {
		b.WriteString(l + "protocol = " + c.pick([]string{`"tcp"`, `"udp"`}) + "\n")
	}
	b.WriteString(pools.String())
	return b.String()
}

// closerFunc makes a Close without an error an io.Closer.
type closerFunc func()

func (f closerFunc) Close() error {
	f()
	return nil
}
