// Package sdnotify tells systemd about the service's state (sd_notify(3)):
// READY=1 once listeners accept, RELOADING=1 while a reload runs (READY=1
// ends it), STOPPING=1 when draining starts, STATUS= for systemctl status,
// MAINPID= when another process becomes the service, and WATCHDOG=1 pings
// (RunWatchdog sends them only while the caller's liveness check passes).
// Without NOTIFY_SOCKET (not started by systemd with Type=notify) every
// notification does nothing.
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Ready tells systemd the service is up, or that a reload is done.
func Ready() error { return Notify("READY=1") }

// Stopping tells systemd the service is shutting down.
func Stopping() error { return Notify("STOPPING=1") }

// Reloading tells systemd a configuration reload began; send Ready when it
// is over (whether it applied or was refused). MONOTONIC_USEC is the
// moment it began on CLOCK_MONOTONIC, which systemd (253 and later) uses
// to tell this reload cycle from an earlier one.
func Reloading() error {
	usec, err := monotonicUsec()
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return Notify("RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(usec, 10))
}

// Status sets the line systemctl status shows. A newline would start a
// new assignment, so each becomes a space.
func Status(s string) error {
	return Notify("STATUS=" + strings.ReplaceAll(s, "\n", " "))
}

// MainPID tells systemd that pid is now the service's main process (a
// binary upgrade's new process). Under NotifyAccess=main only the current
// main process may send it; dist/l4lb.service sets NotifyAccess=all so the
// new process can send it itself.
func MainPID(pid int) error { return Notify("MAINPID=" + strconv.Itoa(pid)) }

// Watchdog pings systemd's watchdog (WatchdogSec=). RunWatchdog sends it
// only while a liveness check passes; call it directly only for a process
// with nothing to check.
func Watchdog() error { return Notify("WATCHDOG=1") }

// sendTimeout bounds one notification.
const sendTimeout = 2 * time.Second

// Enabled reports whether systemd listens (NOTIFY_SOCKET is set): without
// it every notification does nothing, and what only feeds them need not run.
func Enabled() bool { return os.Getenv("NOTIFY_SOCKET") != "" }

// Notify sends state (one or more VAR=VALUE lines) to $NOTIFY_SOCKET. An
// abstract socket is written with a leading '@', as systemd does.
func Notify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	// systemd reads its socket at once; one that does not (a stalled
	// manager, a full queue) must not stall the caller, which may be
	// handling a signal.
	c.SetWriteDeadline(time.Now().Add(sendTimeout))
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// monotonicUsec reads CLOCK_MONOTONIC in µs, the clock systemd compares
// MONOTONIC_USEC with.
func monotonicUsec() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC): %w", err)
	}
	return ts.Sec*1_000_000 + ts.Nsec/1_000, nil
}
