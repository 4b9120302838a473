package udpsession

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The same link-local address and port on two interfaces are two
// clients: a session's key carries the scope (the zone), and its replies
// are addressed with it.
func TestUDPSessionKeyKeepsTheScope(t *testing.T) {
	name := func(scope uint32) *sockName {
		n := &sockName{Family: unix.AF_INET6, Scope_id: scope, Addr: netip.MustParseAddr("fe80::1").As16()}
		n.Port = uint16(5353>>8 | (5353&0xff)<<8) // network order
		return n
	}
	a, b := nameAddrPort(name(3)), nameAddrPort(name(4))
	if a == b {
		t.Fatalf("fe80::1 port 5353 on interfaces 3 and 4 read as one client, %v", a)
	}
	if a != netip.MustParseAddrPort("[fe80::1%3]:5353") {
		t.Fatalf("nameAddrPort = %v, want [fe80::1%%3]:5353", a)
	}
	if got := nameAddrPort(name(0)); got != netip.MustParseAddrPort("[fe80::1]:5353") {
		t.Fatalf("unscoped: %v", got)
	}
	mapped := name(0)
	mapped.Addr = netip.MustParseAddr("::ffff:10.0.0.1").As16()
	if got := nameAddrPort(mapped); got != netip.MustParseAddrPort("10.0.0.1:5353") {
		t.Fatalf("IPv4-mapped: %v", got)
	}

	// A reply leaves addressed to the scope its client came from.
	o := newUDPOut()
	s := &session{u: &udpSock{}, name: *name(4), nameLen: nameLen(name(4))}
	o.add(0, s)
	if got := o.b.names[0]; got.Scope_id != 4 || got.Addr != name(4).Addr || got.Port != name(4).Port {
		t.Fatalf("reply addressed to %+v, want scope 4", got)
	}
}

const udpZoneChildEnv = "L4LB_TEST_UDP_ZONE_CHILD"

// Two clients with the same link-local address and port, on two
// interfaces, talking to a wildcard UDP listener: each gets its own
// session and its own replies, on its own interface. Runs in a namespace
// of its own; the clients sit in one more, behind two veth pairs.
func TestUDPLinkLocalClientsOnTwoInterfaces(t *testing.T) {
	testnet.RunInNetns(t, udpZoneChildEnv, "TestUDPLinkLocalClientsInNamespace", 2*time.Minute)
}

func TestUDPLinkLocalClientsInNamespace(t *testing.T) {
	if os.Getenv(udpZoneChildEnv) == "" {
		t.Skip("runs inside TestUDPLinkLocalClientsOnTwoInterfaces's network namespace")
	}
	peer := fmt.Sprintf("l4lbz-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("ip %v: %v\n%s (no netns or veth here)", args, err, out)
		}
	}
	ip("netns", "add", peer)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", peer).Run() })
	for _, pair := range [][2]string{{"zc0", "zc1"}, {"zd0", "zd1"}} {
		ip("link", "add", pair[0], "type", "veth", "peer", "name", pair[1], "netns", peer)
		ip("link", "set", pair[0], "up")
		ip("-6", "addr", "add", "fe80::2/64", "dev", pair[0], "nodad")
		ip("-n", peer, "link", "set", pair[1], "up")
		ip("-n", peer, "-6", "addr", "add", "fe80::1/64", "dev", pair[1], "nodad")
	}
	ip("-n", peer, "link", "set", "lo", "up")

	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	r := newUDPRig(t, []string{a.Addr, b.Addr}, udpRigOpts{bind: "[::]:0"})
	port := netip.MustParseAddrPort(r.addr).Port()

	// Both clients: fe80::1, one port, one socket on each interface.
	var c, d *net.UDPConn
	inNetns(t, peer, func() {
		var err error
		if c, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP("fe80::1"), Zone: "zc1"}); err != nil {
			t.Fatal(err)
		}
		p := c.LocalAddr().(*net.UDPAddr).Port
		if d, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP("fe80::1"), Port: p, Zone: "zd1"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { c.Close(); d.Close() })

	ask := func(conn *net.UDPConn, zone string) string {
		t.Helper()
		to := &net.UDPAddr{IP: net.ParseIP("fe80::2"), Port: int(port), Zone: zone}
		buf := make([]byte, 64)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := conn.WriteToUDP([]byte("who"), to); err != nil {
				t.Fatalf("send via %s: %v", zone, err)
			}
			conn.SetReadDeadline(time.Now().Add(time.Second))
			if n, _, err := conn.ReadFromUDP(buf); err == nil {
				return string(buf[:n])
			}
		}
		t.Fatalf("the client on %s got no reply: its datagrams went to the other interface's session", zone)
		return ""
	}
	first := ask(c, "zc1")
	second := ask(d, "zd1")
	if first == second {
		t.Errorf("both clients reached backend %q: one session for two clients (round robin gives the second session the other backend)", first)
	}
	if n := r.front.Started.Load(); n != 2 {
		t.Errorf("%d sessions started for two clients, want 2", n)
	}
	var keys []netip.AddrPort
	r.on(r.loops[0], func() {
		for k := range r.loops[0].udps[0].sessions {
			keys = append(keys, k)
		}
	})
	for _, k := range keys {
		if k.Addr().Zone() == "" {
			t.Errorf("session key %v has no zone", k)
		}
	}
}

// inNetns runs f on a thread moved into the named network namespace:
// sockets f opens belong to it.
func inNetns(t *testing.T, name string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer home.Close()
	there, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer there.Close()
	if err := unix.Setns(int(there.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(err) // the thread must not go back to the pool in the wrong namespace
		}
	}()
	f()
}
