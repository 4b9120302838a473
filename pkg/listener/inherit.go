package listener

import (
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Inherited is a socket this process received open instead of binding it:
// from the l4lb it replaces (a binary upgrade) or from systemd (socket
// activation, LISTEN_FDS). What it is comes from the socket itself
// (getsockname, SO_TYPE), never from a name it was passed with.
type Inherited struct {
	FD       int
	Protocol string         // "tcp" | "udp"
	Addr     netip.AddrPort // bound address; an IPv4-mapped one unmapped
}

func (s Inherited) String() string { return s.Protocol + " " + s.Addr.String() }

// Describe says what an inherited fd is: a TCP or UDP socket of family
// IPv4 or IPv6, bound to an address. Anything else is an error.
func Describe(fd int) (Inherited, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return Inherited{}, fmt.Errorf("fd %d: not a socket: %w", fd, err)
	}
	proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil {
		return Inherited{}, fmt.Errorf("fd %d: SO_PROTOCOL: %w", fd, err)
	}
	in := Inherited{FD: fd}
	switch {
	case typ == unix.SOCK_STREAM && (proto == unix.IPPROTO_TCP || proto == unix.IPPROTO_MPTCP):
		// MPTCP: what Go's net.Listen opens where the kernel has it (the
		// admin endpoint's socket); TCP to its clients.
		in.Protocol = "tcp"
	case typ == unix.SOCK_DGRAM && proto == unix.IPPROTO_UDP:
		in.Protocol = "udp"
	default:
		return Inherited{}, fmt.Errorf("fd %d: neither a TCP nor a UDP socket (type %d, protocol %d)", fd, typ, proto)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return Inherited{}, fmt.Errorf("fd %d: getsockname: %w", fd, err)
	}
	switch sa.(type) {
	case *unix.SockaddrInet4, *unix.SockaddrInet6:
	default:
		return Inherited{}, fmt.Errorf("fd %d: not an IPv4 or IPv6 socket", fd)
	}
	ap := sockaddrToTCP(sa).AddrPort()
	in.Addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if in.Addr.Port() == 0 {
		return Inherited{}, fmt.Errorf("fd %d: %s socket not bound", fd, in.Protocol)
	}
	return in, nil
}

// SocketID identifies the socket behind fd (its inode): two descriptors
// of one socket (dups) have the same.
func SocketID(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// InheritedSet holds the inherited sockets not yet taken by a listener.
type InheritedSet struct {
	socks []Inherited
}

// NewInheritedSet describes each fd. The fds it cannot use (not a bound
// TCP or UDP socket) are closed and reported in the error list; the rest
// are in the set.
func NewInheritedSet(fds []int) (*InheritedSet, []error) {
	s := &InheritedSet{}
	var errs []error
	for _, fd := range fds {
		in, err := Describe(fd)
		if err != nil {
			unix.Close(fd)
			errs = append(errs, err)
			continue
		}
		s.socks = append(s.socks, in)
	}
	return s, errs
}

// Take removes and returns the fds of every socket of protocol bound to
// bind (host:port, an IP literal; an IPv4-mapped address is its IPv4
// address). A bind with port 0 asks for any free port and matches
// nothing.
func (s *InheritedSet) Take(protocol, bind string) []int {
	if s == nil {
		return nil
	}
	ap, err := netip.ParseAddrPort(bind)
	if err != nil || ap.Port() == 0 {
		return nil
	}
	want := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	var fds []int
	kept := s.socks[:0]
	for _, in := range s.socks {
		if in.Protocol == protocol && in.Addr == want {
			fds = append(fds, in.FD)
			continue
		}
		kept = append(kept, in)
	}
	s.socks = kept
	return fds
}

// Rest returns and removes the sockets no listener took.
func (s *InheritedSet) Rest() []Inherited {
	if s == nil {
		return nil
	}
	rest := s.socks
	s.socks = nil
	return rest
}

// Adopt makes inherited TCP sockets of one address a listener's, as Bind
// would have made them: non-blocking, close-on-exec, TCP_NODELAY and
// SO_OOBINLINE (which accepted sockets inherit), and listening with the
// given backlog (listen(2) on a listening socket only changes its queue
// limit, so the configured backlog applies to inherited sockets too; 0:
// the kernel's somaxconn). The returned Sockets share fds: a taker sets
// its slot to -1, as with Bind. On an error the fds are left open, for
// the caller to close.
func Adopt(name string, fds []int, backlog int) (*Sockets, error) {
	if len(fds) == 0 {
		return nil, fmt.Errorf("listener %q: no inherited socket", name)
	}
	if backlog <= 0 || backlog > maxBacklog {
		backlog = maxBacklog
	}
	s := &Sockets{Name: name, FDs: fds}
	for _, fd := range fds {
		for _, step := range []struct {
			what string
			do   func() error
		}{
			{"set non-blocking", func() error { return unix.SetNonblock(fd, true) }},
			{"set close-on-exec", func() error { _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); return err }},
			{"setsockopt TCP_NODELAY", func() error { return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) }},
			{"setsockopt SO_OOBINLINE", func() error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_OOBINLINE, 1) }},
			{fmt.Sprintf("listen backlog %d", backlog), func() error { return unix.Listen(fd, backlog) }},
		} {
			if err := step.do(); err != nil {
				return nil, fmt.Errorf("listener %q: inherited fd %d: %s: %w", name, fd, step.what, err)
			}
		}
	}
	sa, err := unix.Getsockname(fds[0])
	if err != nil {
		return nil, fmt.Errorf("listener %q: getsockname: %w", name, err)
	}
	s.Addr = sockaddrToTCP(sa)
	return s, nil
}

// AdoptUDP makes inherited UDP sockets of one address a UDP listener's:
// non-blocking, close-on-exec, and, on a wildcard address, with packet
// info on (so replies leave from the address each client sent to). The
// returned UDPSockets share fds, as with Adopt.
func AdoptUDP(name string, fds []int) (*UDPSockets, error) {
	if len(fds) == 0 {
		return nil, fmt.Errorf("listener %q: no inherited socket", name)
	}
	sa, err := unix.Getsockname(fds[0])
	if err != nil {
		return nil, fmt.Errorf("listener %q: getsockname: %w", name, err)
	}
	t := sockaddrToTCP(sa)
	s := &UDPSockets{Name: name, Addr: &net.UDPAddr{IP: t.IP, Port: t.Port, Zone: t.Zone}, FDs: fds}
	s.Wildcard = s.Addr.AddrPort().Addr().Unmap().IsUnspecified()
	_, v6 := sa.(*unix.SockaddrInet6)
	for _, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			return nil, fmt.Errorf("listener %q: inherited fd %d: set non-blocking: %w", name, fd, err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			return nil, fmt.Errorf("listener %q: inherited fd %d: set close-on-exec: %w", name, fd, err)
		}
		if !s.Wildcard {
			continue
		}
		if v6 {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		} else {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
		if err != nil {
			return nil, fmt.Errorf("listener %q: inherited fd %d: setsockopt PKTINFO: %w", name, fd, err)
		}
	}
	return s, nil
}
