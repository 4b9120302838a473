package listener

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// moves are the address pairs a listener moves between on one port: a
// specific address and its family's wildcard.
func moves(t *testing.T) [][2]string {
	out := [][2]string{{"127.0.0.1", "0.0.0.0"}}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		out = append(out, [2]string{"::1", "::"})
	} else {
		t.Logf("no IPv6 loopback here, IPv4 only: %v", err)
	}
	return out
}

// bindOwn binds proto sockets on ap beside own and returns their fds and
// a closer.
func bindOwn(proto string, ap netip.AddrPort, own Own) ([]int, func(), error) {
	if proto == "udp" {
		s, err := BindUDPOwn("t", ap.String(), 2, own)
		if err != nil {
			return nil, nil, err
		}
		return s.FDs, s.Close, nil
	}
	s, err := BindOwn("t", ap.String(), 0, 2, own)
	if err != nil {
		return nil, nil, err
	}
	return s.FDs, s.Close, nil
}

// A listener's sockets on one address do not keep it from binding an
// overlapping address of the same port (a specific address and its
// family's wildcard, either way) when they are declared its own: that is
// a reload or an upgrade moving the listener. Undeclared, they are
// refused as today.
func TestBindBesideOwnSocketsOnAnOverlappingAddress(t *testing.T) {
	testnet.CheckLeaks(t)
	for _, pair := range moves(t) {
		for _, proto := range []string{"tcp", "udp"} {
			for _, dir := range [][2]int{{0, 1}, {1, 0}} {
				port := uint16(testnet.FreePort(t))
				from := netip.AddrPortFrom(netip.MustParseAddr(pair[dir[0]]), port)
				to := netip.AddrPortFrom(netip.MustParseAddr(pair[dir[1]]), port)
				t.Run(fmt.Sprintf("%s %s to %s", proto, from, to), func(t *testing.T) {
					old, closeOld, err := bindOwn(proto, from, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer closeOld()
					if _, closeNew, err := bindOwn(proto, to, nil); err == nil {
						closeNew()
						t.Fatalf("%s bound beside %s with nothing declared own", to, from)
					} else if !strings.Contains(err.Error(), "already in use by another socket") {
						t.Fatalf("error %q does not say the address is in use", err)
					}
					own := Own{}
					own.Add(old)
					fds, closeNew, err := bindOwn(proto, to, own)
					if err != nil {
						t.Fatalf("%s refused beside this process's own sockets on %s: %v", to, from, err)
					}
					defer closeNew()
					if proto == "tcp" {
						// While both listen, the specific address's sockets take
						// its clients; once the old ones close, the new ones do:
						// the port is never without a listener.
						specific := from
						if specific.Addr().IsUnspecified() {
							specific = to
						}
						dialAndClose(t, specific)
						if specific == from {
							acceptAll(t, old, 1, func(int) {})
						} else {
							acceptAll(t, fds, 1, func(int) {})
						}
						closeOld()
						dialAndClose(t, netip.AddrPortFrom(netip.MustParseAddr(pair[0]), port))
						acceptAll(t, fds, 1, func(int) {})
					}
				})
			}
		}
	}
}

func dialAndClose(t *testing.T, ap netip.AddrPort) {
	t.Helper()
	c, err := net.DialTimeout("tcp", ap.String(), 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", ap, err)
	}
	c.Close()
}

// Declared sockets excuse only themselves: another socket on the port,
// one that would be joined silently (SO_REUSEPORT, the same user, on the
// very address asked) or a plain one, is still refused with the clear
// error.
func TestOwnStillRefusesAnotherSocket(t *testing.T) {
	testnet.CheckLeaks(t)
	for _, pair := range moves(t) {
		for _, proto := range []string{"tcp", "udp"} {
			sotype := unix.SOCK_STREAM
			if proto == "udp" {
				sotype = unix.SOCK_DGRAM
			}
			t.Run(proto+" "+pair[0], func(t *testing.T) {
				port := uint16(testnet.FreePort(t))
				specific := netip.AddrPortFrom(netip.MustParseAddr(pair[0]), port)
				wildcard := netip.AddrPortFrom(netip.MustParseAddr(pair[1]), port)
				check := func(what string, ap netip.AddrPort, own Own) {
					t.Helper()
					if _, closeNew, err := bindOwn(proto, ap, own); err == nil {
						closeNew()
						t.Fatalf("%s: bound %s", what, ap)
					} else if !strings.Contains(err.Error(), "already in use by another socket") {
						t.Fatalf("%s: error %q does not say the address is in use", what, err)
					}
				}

				// Ours on the specific address, another SO_REUSEPORT socket
				// already on the wildcard: moving to the wildcard would join it.
				ours, closeOurs, err := bindOwn(proto, specific, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(closeOurs)
				own := Own{}
				own.Add(ours)
				other := foreignReusePort(t, sotype, wildcard)
				check("another SO_REUSEPORT socket on the wildcard", wildcard, own)
				unix.Close(other)
				closeOurs()

				// The reverse: ours on the wildcard, another on the
				// specific address.
				ours, closeOurs, err = bindOwn(proto, wildcard, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(closeOurs)
				own = Own{}
				own.Add(ours)
				other = foreignReusePort(t, sotype, specific)
				check("another SO_REUSEPORT socket on the address", specific, own)
				unix.Close(other)
				closeOurs()

				// A plain socket where own holds nothing of the port
				// (closed at the end of the test).
				plainSocket(t, sotype, specific.String(), proto == "tcp")
				elsewhere, closeElsewhere, err := bindOwn(proto, netip.AddrPortFrom(specific.Addr(), 0), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(closeElsewhere)
				own = Own{}
				own.Add(elsewhere)
				check("a plain socket on the address", specific, own)
				check("a plain socket on an address of the wildcard", wildcard, own)
				closeElsewhere()
			})
		}
	}
}

// foreignReusePort is a socket of the same user with SO_REUSEPORT bound
// (and for TCP listening) on ap, not declared own: another l4lb, or any
// program that would share the port.
func foreignReusePort(t *testing.T, sotype int, ap netip.AddrPort) int {
	t.Helper()
	proto := unix.IPPROTO_TCP
	if sotype == unix.SOCK_DGRAM {
		proto = unix.IPPROTO_UDP
	}
	fd, _, sa, _, err := reusePortSocket(ap, sotype, proto)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		t.Fatalf("bind %s: %v", ap, err)
	}
	if sotype == unix.SOCK_STREAM {
		if err := unix.Listen(fd, 8); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
	}
	return fd
}

func TestProcAddrPort(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the literals below are in little-endian host order")
	}
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:0035":                         "0.0.0.0:53",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"00000000000000000000000000000000:0000": "[::]:0",
		"0000000000000000FFFF00000100007F:1F90": "[::ffff:127.0.0.1]:8080",
		"B80D0120000000000000000001000000:01BB": "[2001:db8::1]:443",
	} {
		got, err := procAddrPort(in)
		if err != nil || got.String() != want {
			t.Errorf("procAddrPort(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007:1F90", "0100007F:XYZ", "0100007G:1F90"} {
		if _, err := procAddrPort(bad); err == nil {
			t.Errorf("procAddrPort(%q) accepted", bad)
		}
	}
}
