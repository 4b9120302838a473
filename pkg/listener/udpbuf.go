package listener

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// RcvbufSysctl is the sysctl that caps SO_RCVBUF for a process without
// CAP_NET_ADMIN's SO_RCVBUFFORCE (which l4lb does not use: a limit the
// host's administrator set is theirs to raise).
const RcvbufSysctl = "net.core.rmem_max"

// SetReceiveBuffer asks for a receive buffer of size bytes on fd
// (SO_RCVBUF) and returns the size granted, in the same unit: the kernel
// doubles what it is asked for (the other half pays for its bookkeeping)
// and reports the doubled value, so granted is half of it. Granted is
// below size when net.core.rmem_max capped it; a size below the kernel's
// floor is raised to it.
func SetReceiveBuffer(fd, size int) (granted int, err error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, size); err != nil {
		return 0, fmt.Errorf("setsockopt SO_RCVBUF %d: %w", size, err)
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return 0, fmt.Errorf("getsockopt SO_RCVBUF: %w", err)
	}
	return got / 2, nil
}

// SetReceiveBuffer sets size (SO_RCVBUF) on every socket of s and returns
// the smallest size granted (see the function SetReceiveBuffer).
func (s *UDPSockets) SetReceiveBuffer(size int) (granted int, err error) {
	granted = -1
	for _, fd := range s.FDs {
		g, err := SetReceiveBuffer(fd, size)
		if err != nil {
			return 0, fmt.Errorf("listener %q: %w", s.Name, err)
		}
		if granted < 0 || g < granted {
			granted = g
		}
	}
	return granted, nil
}
