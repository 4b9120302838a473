package listener

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// maxBacklog asks for the largest queue; the kernel caps it at
// net.core.somaxconn, which is what a zero backlog means.
const maxBacklog = 1<<16 - 1

// checkUnused refuses an address something already listens on (proto
// "tcp" or "udp"). With SO_REUSEPORT a second process of the same user
// (another l4lb, a demo left running) would otherwise join the port
// silently and take a share of the clients; a plain bind without
// SO_REUSEPORT tells. The plain bind also collides with this process's
// own sockets on an overlapping address of the port ("127.0.0.1:P" when
// "0.0.0.0:P" is asked, or the reverse), which a reload or an upgrade
// moving a listener still holds: then the port's holders are looked up,
// and only a socket not in own counts (see Own).
func checkUnused(proto string, addr netip.AddrPort, own Own) error {
	network := proto + "4"
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		network = proto + "6"
	}
	var c io.Closer
	var err error
	if proto == "udp" {
		c, err = net.ListenPacket(network, addr.String())
	} else {
		c, err = net.Listen(network, addr.String())
	}
	if err != nil {
		if !errors.Is(err, unix.EADDRINUSE) {
			return err
		}
		if len(own) > 0 {
			// Unreadable holders leave the collision as it is: refused.
			if foreign, ferr := foreignHolder(proto, addr, own); ferr == nil && !foreign {
				return nil
			}
		}
		return inUse(err)
	}
	return c.Close()
}

// inUse is the error of an address another socket holds.
func inUse(err error) error {
	return fmt.Errorf("address already in use by another socket (another l4lb?): %w", err)
}

// reusePortSocket opens a non-blocking socket of sotype for ap with
// SO_REUSEPORT, IPv6-only when ap is IPv6 (so "[::]:80" can sit beside
// "0.0.0.0:80"), and returns it with ap as a socket address to bind. fail
// closes the fd and wraps an error of the caller's further setup.
func reusePortSocket(ap netip.AddrPort, sotype, proto int) (fd, family int, sa unix.Sockaddr, fail func(string, error) (int, error), err error) {
	family, sa, err = sockaddrOf(ap)
	if err != nil {
		return -1, 0, nil, nil, err
	}
	fd, err = unix.Socket(family, sotype|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, 0, nil, nil, fmt.Errorf("socket: %w", err)
	}
	fail = func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		_, err = fail("setsockopt SO_REUSEPORT", err)
		return -1, 0, nil, nil, err
	}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			_, err = fail("setsockopt IPV6_V6ONLY", err)
			return -1, 0, nil, nil, err
		}
	}
	return fd, family, sa, fail, nil
}

// closeFDs closes every fd not yet handed over (set to -1 by its taker).
func closeFDs(fds []int) {
	for i, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
			fds[i] = -1
		}
	}
}
