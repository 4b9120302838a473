package listener

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// UDPSockets are the sockets of one UDP listener, one per event loop, as
// raw non-blocking fds. The kernel keeps one client address and port on
// one socket of the reuseport group (it hashes the 4-tuple), so each loop
// sees every datagram of the clients it holds sessions for.
type UDPSockets struct {
	Name string
	Addr *net.UDPAddr // bound address (the chosen port when 0 was asked)
	// Wildcard: bound to 0.0.0.0 or [::], with IP_PKTINFO or
	// IPV6_RECVPKTINFO on, so each datagram says which local address the
	// client sent to, and the reply can come from that address.
	Wildcard bool
	FDs      []int
}

// BindUDP opens n SO_REUSEPORT UDP sockets on addr (host:port, an IP
// literal). As with Bind, an address something else already holds fails
// here rather than being joined.
func BindUDP(name, addr string, n int) (*UDPSockets, error) {
	return BindUDPOwn(name, addr, n, nil)
}

// BindUDPOwn is BindUDP beside sockets this process holds, as BindOwn.
func BindUDPOwn(name, addr string, n int, own Own) (*UDPSockets, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listener %q: bad address %q: %w", name, addr, err)
	}
	if ap.Port() != 0 {
		if err := checkUnused("udp", ap, own); err != nil {
			return nil, fmt.Errorf("listener %q on udp %s: %w", name, addr, err)
		}
	}
	s := &UDPSockets{Name: name, Wildcard: ap.Addr().IsUnspecified()}
	for i := 0; i < max(n, 1); i++ {
		fd, err := rawUDP(ap, s.Wildcard)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("listener %q on udp %s: %w", name, addr, bindError(ap, err))
		}
		s.FDs = append(s.FDs, fd)
		if i == 0 {
			sa, err := unix.Getsockname(fd)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("listener %q: getsockname: %w", name, err)
			}
			t := sockaddrToTCP(sa)
			s.Addr = &net.UDPAddr{IP: t.IP, Port: t.Port, Zone: t.Zone}
			ap = s.Addr.AddrPort()
		}
	}
	return s, nil
}

// Close closes every fd not yet handed over (set to -1 by its taker).
func (s *UDPSockets) Close() { closeFDs(s.FDs) }

func rawUDP(ap netip.AddrPort, wildcard bool) (int, error) {
	fd, family, sa, fail, err := reusePortSocket(ap, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
	if err != nil {
		return -1, err
	}
	if wildcard {
		if family == unix.AF_INET6 {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		} else {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
		if err != nil {
			return fail("setsockopt PKTINFO", err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	return fd, nil
}

// sockaddrOf is ap as a socket address, with its family.
func sockaddrOf(ap netip.AddrPort) (int, unix.Sockaddr, error) {
	if !ap.Addr().Is6() || ap.Addr().Is4In6() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}, nil
	}
	sa6 := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	if z := ap.Addr().Zone(); z != "" {
		// A numeric zone is an interface index, as the net package (and
		// so the pre-bind check) reads it.
		if ifi, err := net.InterfaceByName(z); err == nil {
			sa6.ZoneId = uint32(ifi.Index)
		} else if n, nerr := strconv.ParseUint(z, 10, 32); nerr == nil {
			sa6.ZoneId = uint32(n)
		} else {
			return 0, nil, fmt.Errorf("zone %s: %w", z, err)
		}
	}
	return unix.AF_INET6, sa6, nil
}
