// Package sdnotify tells systemd about the service's state (sd_notify(3)):
// READY=1 once listeners accept, STOPPING=1 when draining starts. Without
// NOTIFY_SOCKET (not started by systemd with Type=notify) it does nothing.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// Ready tells systemd the service is up.
func Ready() error { return Notify("READY=1") }

// Stopping tells systemd the service is shutting down.
func Stopping() error { return Notify("STOPPING=1") }

// Notify sends state to $NOTIFY_SOCKET. An abstract socket is written
// with a leading '@', as systemd does.
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
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}
