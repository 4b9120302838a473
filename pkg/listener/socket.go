package listener

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// maxBacklog asks for the largest queue; the kernel caps it at
// net.core.somaxconn, which is what a zero backlog means.
const maxBacklog = 1<<16 - 1

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
