package relay

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// connectTo opens a non-blocking TCP socket with TCP_NODELAY (small
// messages must not wait for Nagle behind a proxy) and SO_OOBINLINE, and
// starts connecting it to ap. It returns the fd and the connect's error: nil or EINPROGRESS
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
	family, sa := rawsys.SockaddrOf(ap)
	fd, err := rawsys.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, err
	}
	if err := rawsys.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		rawsys.Close(fd)
		return -1, err
	}
	// Urgent data stays in the stream (relayed as ordinary bytes) instead
	// of being read aside and lost.
	if err := rawsys.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_OOBINLINE, 1); err != nil {
		rawsys.Close(fd)
		return -1, err
	}
	if err := ka.Apply(fd); err != nil {
		rawsys.Close(fd)
		return -1, err
	}
	if src != nil {
		if err := bindSource(fd, family, src); err != nil {
			rawsys.Close(fd)
			return -1, err
		}
	}
	if err := rawsys.SetZone(fd, ap, &sa); err != nil {
		rawsys.Close(fd)
		return -1, err
	}
	err = rawsys.Connect(fd, &sa)
	if err != nil && err != unix.EINPROGRESS {
		rawsys.Close(fd)
		return -1, err
	}
	return fd, err
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
