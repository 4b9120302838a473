package sockopt

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Keepalive is TCP keepalive on one side of a relay. The zero value is off.
type Keepalive struct {
	// Idle is how long a connection is quiet before the first probe
	// (TCP_KEEPIDLE); 0: keepalive off.
	Idle time.Duration
	// Interval is the time between probes (TCP_KEEPINTVL); 0: the
	// kernel's (net.ipv4.tcp_keepalive_intvl).
	Interval time.Duration
	// Count is how many unanswered probes end the connection
	// (TCP_KEEPCNT); 0: the kernel's (net.ipv4.tcp_keepalive_probes).
	Count int
}

// On reports whether keepalive is wanted.
func (k Keepalive) On() bool { return k.Idle > 0 }

// Apply sets the options on fd: on a listening socket, connections it
// accepts inherit them (Linux copies the socket options to the child), so
// the per-connection cost is nothing; on a connecting one, they hold once
// it is established. Off, it does nothing (the kernel default is off).
func (k Keepalive) Apply(fd int) error {
	if !k.On() {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1); err != nil {
		return fmt.Errorf("SO_KEEPALIVE: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, seconds(k.Idle)); err != nil {
		return fmt.Errorf("TCP_KEEPIDLE: %w", err)
	}
	if k.Interval > 0 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, seconds(k.Interval)); err != nil {
			return fmt.Errorf("TCP_KEEPINTVL: %w", err)
		}
	}
	if k.Count > 0 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, k.Count); err != nil {
			return fmt.Errorf("TCP_KEEPCNT: %w", err)
		}
	}
	return nil
}

// Read returns the keepalive options set on fd, as the kernel reports them
// (for tests and diagnostics).
func Read(fd int) (on bool, idle, interval time.Duration, count int, err error) {
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
	if err != nil {
		return false, 0, 0, 0, err
	}
	i, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
	if err != nil {
		return false, 0, 0, 0, err
	}
	n, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
	if err != nil {
		return false, 0, 0, 0, err
	}
	c, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
	if err != nil {
		return false, 0, 0, 0, err
	}
	return v != 0, time.Duration(i) * time.Second, time.Duration(n) * time.Second, c, nil
}

// seconds rounds up: the kernel counts keepalive in whole seconds, and
// "1.5s" must not become 1s of less patience than asked.
func seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
