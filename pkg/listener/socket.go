package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxBacklog asks for the largest queue; the kernel caps it at
// net.core.somaxconn, which is what a zero backlog means.
const maxBacklog = 1<<16 - 1

// listenSocket opens one listening socket on addr with SO_REUSEPORT so that
// several sockets can share the address.
func listenSocket(addr netip.AddrPort, backlog int) (*net.TCPListener, error) {
	network := "tcp4"
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		// tcp6 sets IPV6_V6ONLY: "[::]:80" is IPv6 only, so it can sit
		// beside "0.0.0.0:80" in the same config.
		network = "tcp6"
	}
	lc := net.ListenConfig{
		// Keepalive probes cost four setsockopt calls per accepted
		// connection; dead clients are found by the idle timeout instead.
		KeepAlive: -1,
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			})
			if err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("setsockopt SO_REUSEPORT: %w", serr)
			}
			return nil
		},
	}
	ln, err := lc.Listen(context.Background(), network, addr.String())
	if err != nil {
		return nil, err
	}
	tl := ln.(*net.TCPListener)
	if err := setBacklog(tl, backlog); err != nil {
		tl.Close()
		return nil, err
	}
	return tl, nil
}

// setBacklog calls listen(2) again on the listening socket: Linux then only
// resizes its accept queue. The net package always uses somaxconn.
func setBacklog(ln *net.TCPListener, backlog int) error {
	if backlog <= 0 || backlog > maxBacklog {
		backlog = maxBacklog
	}
	raw, err := ln.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := raw.Control(func(fd uintptr) { lerr = unix.Listen(int(fd), backlog) }); err != nil {
		return err
	}
	if lerr != nil {
		return fmt.Errorf("listen backlog %d: %w", backlog, lerr)
	}
	return nil
}

// checkUnused refuses an address something already listens on. With
// SO_REUSEPORT a second process of the same user (another l4lb, a demo
// left running) would otherwise join the port silently and take a share of
// the connections; a plain bind without SO_REUSEPORT tells.
func checkUnused(addr netip.AddrPort) error {
	network := "tcp4"
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		network = "tcp6"
	}
	ln, err := net.Listen(network, addr.String())
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return fmt.Errorf("address already in use by another socket (another l4lb?): %w", err)
		}
		return err
	}
	return ln.Close()
}
