package loop

import (
	"fmt"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// accept4 accepts one connection, non-blocking, and returns its peer
// address without allocating (unix.Accept4 allocates a Sockaddr).
func accept4(fd int) (int, netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	l := uint32(unix.SizeofSockaddrAny)
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(&rsa)),
			uintptr(unsafe.Pointer(&l)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, netip.AddrPort{}, e
		}
		return int(r), rawToAddrPort(&rsa), nil
	}
}

// getsockname returns a socket's local address without allocating.
func getsockname(fd int) (netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	l := uint32(unix.SizeofSockaddrAny)
	_, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)))
	if e != 0 {
		return netip.AddrPort{}, e
	}
	return rawToAddrPort(&rsa), nil
}

func rawToAddrPort(rsa *unix.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), ntohs(p.Port))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		a := netip.AddrFrom16(p.Addr).Unmap()
		return netip.AddrPortFrom(a, ntohs(p.Port))
	}
	return netip.AddrPort{}
}

func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// connectTo opens a non-blocking TCP socket with TCP_NODELAY (small
// messages must not wait for Nagle behind a proxy) and SO_OOBINLINE, and
// starts connecting
// it to ap. It returns the fd and the connect's error: nil or EINPROGRESS
// mean under way.
func connectTo(ap netip.AddrPort, ka sockopt.Keepalive, srcs []config.Source, first int) (int, error) {
	if len(srcs) == 0 {
		return connectFrom(ap, ka, nil)
	}
	// From each source in turn, starting at first: a source whose ports
	// toward this backend are all in use (EADDRNOTAVAIL at connect, the
	// port being chosen by the full 4-tuple) gives way to the next. All
	// of them out of ports is local trouble.
	var err error
	for k := range srcs {
		fd, e := connectFrom(ap, ka, &srcs[(first+k)%len(srcs)])
		if fd >= 0 || (e != unix.EADDRNOTAVAIL && e != unix.EADDRINUSE) {
			return fd, e
		}
		err = e
	}
	return -1, err
}

// connectFrom starts a non-blocking connect to ap from src (nil: the
// kernel's choice of address and port).
func connectFrom(ap netip.AddrPort, ka sockopt.Keepalive, src *config.Source) (int, error) {
	family, sa := socketAddress(ap)
	fd, err := newSocket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, err
	}
	if err := setsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		closeFd(fd)
		return -1, err
	}
	// Urgent data stays in the stream (relayed as ordinary bytes) instead
	// of being read aside and lost.
	if err := setsockoptInt(fd, unix.SOL_SOCKET, unix.SO_OOBINLINE, 1); err != nil {
		closeFd(fd)
		return -1, err
	}
	if err := ka.Apply(fd); err != nil {
		closeFd(fd)
		return -1, err
	}
	if src != nil {
		if err := bindSource(fd, family, src); err != nil {
			closeFd(fd)
			return -1, err
		}
	}
	if err := setZone(fd, ap, &sa); err != nil {
		closeFd(fd)
		return -1, err
	}
	err = connectRaw(fd, &sa)
	if err != nil && err != unix.EINPROGRESS {
		closeFd(fd)
		return -1, err
	}
	return fd, err
}

// setZone puts ap's IPv6 zone into sa as the interface index a link-local
// address needs (connect(2) refuses one without it: EINVAL). A numeric
// zone is the index itself, as the net package reads it; a name is looked
// up on fd (one ioctl, for zoned addresses only), so an interface that was
// re-created is found under its new index.
func setZone(fd int, ap netip.AddrPort, sa *rawSockaddr) error {
	z := ap.Addr().Zone()
	if z == "" || sa.sa.Family != unix.AF_INET6 {
		return nil
	}
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		sa.sa.Scope_id = uint32(n)
		return nil
	}
	ifr, err := unix.NewIfreq(z)
	if err != nil {
		return fmt.Errorf("zone %q: %w", z, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("zone %q: %w", z, err)
	}
	sa.sa.Scope_id = ifr.Uint32()
	return nil
}

// bindSource binds fd to src's address without a port: with
// IP_BIND_ADDRESS_NO_PORT the kernel picks the port at connect(2), unique
// for the full 4-tuple, so one source serves a port range per backend
// rather than one range for all of them. A source's port range narrows the
// choice (IP_LOCAL_PORT_RANGE, Linux 6.3+).
func bindSource(fd, family int, src *config.Source) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1); err != nil {
		return err
	}
	if src.PortLo != 0 {
		r := int(src.PortLo) | int(src.PortHi)<<16
		if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_LOCAL_PORT_RANGE, r); err != nil {
			return err
		}
	}
	if family == unix.AF_INET {
		return unix.Bind(fd, &unix.SockaddrInet4{Addr: src.Addr.As4()})
	}
	return unix.Bind(fd, &unix.SockaddrInet6{Addr: src.Addr.As16()})
}

// soError reads and clears a socket's pending error (the result of a
// non-blocking connect).
func soError(fd int) error {
	v, err := getsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if v != 0 {
		return unix.Errno(v)
	}
	return nil
}

// resetClose closes fd with a reset (SO_LINGER 0): the peer learns the
// stream was cut, not that it ended.
func resetClose(fd int) {
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	closeFd(fd)
}
