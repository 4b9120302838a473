package rawsys

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// SockaddrOf must lay an address out as the kernel reads it, for both
// families and for an IPv4-mapped IPv6 address (connected as IPv4): a
// blocking connect to a real listener says whether it did.
func TestRawConnectReachesListenersOfBothFamilies(t *testing.T) {
	for _, tc := range []struct {
		network, listen string
		dial            func(port uint16) netip.AddrPort
		family          int
	}{
		{"tcp4", "127.0.0.1:0", func(p uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), p) }, unix.AF_INET},
		{"tcp4", "127.0.0.1:0", func(p uint16) netip.AddrPort {
			return netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), p)
		}, unix.AF_INET},
		{"tcp6", "[::1]:0", func(p uint16) netip.AddrPort { return netip.AddrPortFrom(netip.IPv6Loopback(), p) }, unix.AF_INET6},
	} {
		ln, err := net.Listen(tc.network, tc.listen)
		if err != nil {
			t.Skipf("%s: %v", tc.listen, err)
		}
		ap := tc.dial(uint16(ln.Addr().(*net.TCPAddr).Port))
		family, sa := SockaddrOf(ap)
		if family != tc.family {
			t.Errorf("%v: family %d, want %d", ap, family, tc.family)
		}
		fd, err := Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			t.Fatal(err)
		}
		if err := Connect(fd, &sa); err != nil {
			t.Errorf("connect to %v: %v", ap, err)
		} else if peer, err := unix.Getpeername(fd); err != nil {
			t.Errorf("getpeername after connecting to %v: %v", ap, err)
		} else {
			var port int
			switch p := peer.(type) {
			case *unix.SockaddrInet4:
				port = p.Port
			case *unix.SockaddrInet6:
				port = p.Port
			}
			if uint16(port) != ap.Port() {
				t.Errorf("connected to port %d, want %d", port, ap.Port())
			}
		}
		Close(fd)
		ln.Close()
	}
}
