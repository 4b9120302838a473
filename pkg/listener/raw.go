package listener

import (
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Sockets are the listening sockets of one address, one per event loop,
// as raw non-blocking fds: each loop registers its own in its epoll set, so
// Go's netpoller never sees them.
type Sockets struct {
	Name string
	Addr *net.TCPAddr // bound address (the chosen port when 0 was asked)
	FDs  []int
}

// Bind opens n SO_REUSEPORT sockets on addr (host:port, an IP literal)
// with the given backlog (0: the kernel's somaxconn). A busy address fails
// here, not in a loop: a second l4lb, or anything else, already listening
// there is refused rather than joined.
func Bind(name, addr string, backlog, n int) (*Sockets, error) {
	return BindOwn(name, addr, backlog, n, nil)
}

// BindOwn is Bind beside sockets this process holds (own): one of them on
// an overlapping address of the port is not taken for another's.
func BindOwn(name, addr string, backlog, n int, own Own) (*Sockets, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listener %q: bad address %q: %w", name, addr, err)
	}
	if ap.Port() != 0 {
		if err := checkUnused("tcp", ap, own); err != nil {
			return nil, fmt.Errorf("listener %q on %s: %w", name, addr, err)
		}
	}
	s := &Sockets{Name: name}
	for i := 0; i < max(n, 1); i++ {
		fd, err := rawListen(ap, backlog)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("listener %q on %s: %w", name, addr, bindError(ap, err))
		}
		s.FDs = append(s.FDs, fd)
		if i == 0 {
			// With port 0 the kernel chose a port: the other sockets
			// must join that one.
			sa, err := unix.Getsockname(fd)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("listener %q: getsockname: %w", name, err)
			}
			s.Addr = sockaddrToTCP(sa)
			ap = s.Addr.AddrPort()
		}
	}
	return s, nil
}

// Close closes every fd not yet handed over (set to -1 by its taker).
func (s *Sockets) Close() { closeFDs(s.FDs) }

func rawListen(ap netip.AddrPort, backlog int) (int, error) {
	fd, _, sa, fail, err := reusePortSocket(ap, unix.SOCK_STREAM, unix.IPPROTO_TCP)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt SO_REUSEADDR", err)
	}
	// Accepted sockets inherit TCP_NODELAY from their listener: small
	// messages do not wait for Nagle behind a proxy, and no accept pays a
	// setsockopt for it.
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fail("setsockopt TCP_NODELAY", err)
	}
	// And SO_OOBINLINE: a client's TCP urgent byte stays in the stream and
	// is relayed, instead of being read aside and lost.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_OOBINLINE, 1); err != nil {
		return fail("setsockopt SO_OOBINLINE", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	if backlog <= 0 || backlog > maxBacklog {
		backlog = maxBacklog
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return fail(fmt.Sprintf("listen backlog %d", backlog), err)
	}
	return fd, nil
}

func sockaddrToTCP(sa unix.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *unix.SockaddrInet6:
		zone := ""
		if a.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(a.ZoneId)); err == nil {
				zone = ifi.Name
			}
		}
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port, Zone: zone}
	}
	return &net.TCPAddr{}
}
