package listener

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// plainSocket is a socket as systemd passes one: blocking, inherited
// (no close-on-exec), bound, and listening when listen is set.
func plainSocket(t *testing.T, typ int, addr string, listen bool) int {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	family, sa, err := sockaddrOf(ap)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(family, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, sa); err != nil {
		t.Fatal(err)
	}
	if listen {
		if err := unix.Listen(fd, 16); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

func TestDescribe(t *testing.T) {
	testnet.CheckLeaks(t)
	tcp := plainSocket(t, unix.SOCK_STREAM, "127.0.0.1:0", true)
	udp := plainSocket(t, unix.SOCK_DGRAM, "127.0.0.1:0", false)
	for _, tc := range []struct {
		fd    int
		proto string
	}{{tcp, "tcp"}, {udp, "udp"}} {
		in, err := Describe(tc.fd)
		if err != nil {
			t.Fatal(err)
		}
		sa, _ := unix.Getsockname(tc.fd)
		want := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*unix.SockaddrInet4).Port))
		if in.Protocol != tc.proto || in.Addr != want || in.FD != tc.fd {
			t.Fatalf("Describe = %+v, want %s on %v", in, tc.proto, want)
		}
	}

	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	unbound, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(unbound)
	for _, tc := range []struct {
		name string
		fd   int
		want string
	}{
		{"unix socket", pair[0], "neither a TCP nor a UDP socket"},
		{"pipe", pipe[0], "not a socket"},
		{"unbound", unbound, "not bound"},
	} {
		if _, err := Describe(tc.fd); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestInheritedSetTake(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:8080")
	s := &InheritedSet{socks: []Inherited{
		{FD: 3, Protocol: "tcp", Addr: a},
		{FD: 4, Protocol: "udp", Addr: a},
		{FD: 5, Protocol: "tcp", Addr: a},
		{FD: 6, Protocol: "tcp", Addr: netip.MustParseAddrPort("[::1]:8080")},
		{FD: 7, Protocol: "tcp", Addr: netip.MustParseAddrPort("0.0.0.0:9")},
	}}
	if got := s.Take("tcp", "127.0.0.1:0"); got != nil {
		t.Fatalf("port 0 took %v; it asks for any free port", got)
	}
	if got := s.Take("tcp", "[::ffff:127.0.0.1]:8080"); len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Fatalf("tcp on the IPv4-mapped address took %v, want [3 5]", got)
	}
	if got := s.Take("tcp", "127.0.0.1:8080"); got != nil {
		t.Fatalf("taken twice: %v", got)
	}
	if got := s.Take("udp", "127.0.0.1:8080"); len(got) != 1 || got[0] != 4 {
		t.Fatalf("udp took %v, want [4]", got)
	}
	if got := s.Take("tcp", "[::1]:8080"); len(got) != 1 || got[0] != 6 {
		t.Fatalf("[::1] took %v, want [6]", got)
	}
	rest := s.Rest()
	if len(rest) != 1 || rest[0].FD != 7 || rest[0].String() != "tcp 0.0.0.0:9" {
		t.Fatalf("rest %v, want fd 7 (tcp 0.0.0.0:9)", rest)
	}
	if s.Rest() != nil {
		t.Fatal("Rest twice")
	}
	var none *InheritedSet
	if none.Take("tcp", "127.0.0.1:8080") != nil || none.Rest() != nil {
		t.Fatal("a nil set holds sockets")
	}
}

// NewInheritedSet closes what it cannot use, and says why.
func TestNewInheritedSetClosesTheUnusable(t *testing.T) {
	testnet.CheckLeaks(t)
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[1])
	tcp := plainSocket(t, unix.SOCK_STREAM, "127.0.0.1:0", true)
	s, errs := NewInheritedSet([]int{pipe[0], tcp})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "not a socket") {
		t.Fatalf("errors %v, want one for the pipe", errs)
	}
	if _, err := unix.FcntlInt(uintptr(pipe[0]), unix.F_GETFD, 0); err != unix.EBADF {
		t.Fatalf("the pipe's fd is still open (%v)", err)
	}
	if rest := s.Rest(); len(rest) != 1 || rest[0].FD != tcp {
		t.Fatalf("set %v, want the TCP socket", rest)
	}
}

// Adopt makes a socket systemd passed (blocking, inherited by children,
// maybe not even listening yet) what Bind makes: non-blocking,
// close-on-exec, TCP_NODELAY and SO_OOBINLINE for accepted sockets,
// listening with the configured backlog.
func TestAdopt(t *testing.T) {
	testnet.CheckLeaks(t)
	fd := plainSocket(t, unix.SOCK_STREAM, "127.0.0.1:0", false)
	fds := []int{fd}
	s, err := Adopt("sd", fds, 7)
	if err != nil {
		t.Fatal(err)
	}
	if &s.FDs[0] != &fds[0] {
		t.Fatal("Adopt copied the fds: a taker's -1 would not reach the caller")
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
		t.Fatal("still blocking")
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
		t.Fatal("no close-on-exec")
	}
	if sockopt(t, fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN) != 1 {
		t.Fatal("not listening")
	}
	if _, limit := testnet.AcceptQueue(t, rawFD(fd)); limit != 7 {
		t.Fatalf("backlog %d, want 7", limit)
	}
	c, err := net.DialTimeout("tcp", s.Addr.String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acceptAll(t, []int{fd}, 1, func(afd int) {
		if sockopt(t, afd, unix.IPPROTO_TCP, unix.TCP_NODELAY) != 1 {
			t.Error("accepted connection without TCP_NODELAY")
		}
		if sockopt(t, afd, unix.SOL_SOCKET, unix.SO_OOBINLINE) != 1 {
			t.Error("accepted connection without SO_OOBINLINE")
		}
	})
	// Adopting changes nothing a second time: an upgrade adopts sockets
	// the previous process adopted or bound.
	if _, err := Adopt("again", fds, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Adopt("none", nil, 0); err == nil {
		t.Fatal("adopted no socket")
	}
}

func TestAdoptUDPWildcard(t *testing.T) {
	testnet.CheckLeaks(t)
	fd := plainSocket(t, unix.SOCK_DGRAM, "0.0.0.0:0", false)
	s, err := AdoptUDP("sd", []int{fd})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Wildcard || s.Addr.Port == 0 {
		t.Fatalf("%+v, want a wildcard on a port", s)
	}
	if sockopt(t, fd, unix.IPPROTO_IP, unix.IP_PKTINFO) != 1 {
		t.Fatal("wildcard UDP socket without IP_PKTINFO")
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
		t.Fatal("still blocking")
	}
	one := plainSocket(t, unix.SOCK_DGRAM, "127.0.0.1:0", false)
	if s, err := AdoptUDP("one", []int{one}); err != nil || s.Wildcard {
		t.Fatalf("%+v %v, want a specific address", s, err)
	}
}
