package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// notifyConfig writes a config with a TCP listener (pool "p") and a UDP
// listener (pool "u", without health checks: the echo backend is not a
// protocol they know) and returns its path and the two listen addresses.
func notifyConfig(t *testing.T, tcpBackend, udpBackend string) (path, listen, udpListen string) {
	t.Helper()
	listen, udpListen = testnet.FreeAddr(t), testnet.FreeAddr(t)
	text := fmt.Sprintf(`[global]
shutdown_timeout = "5m"
[admin]
listen = ""
[[listener]]
name = "front"
bind = %q
pool = "p"
[[listener]]
name = "dgram"
bind = %q
protocol = "udp"
pool = "u"
[pool.p]
[[pool.p.backend]]
addr = %q
[pool.u]
[pool.u.health]
enabled = false
[[pool.u.backend]]
addr = %q
`, listen, udpListen, tcpBackend, udpBackend)
	path = filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, listen, udpListen
}

// l4lb under a fake systemd: READY=1 from its own pid, STATUS= with the
// open connections, UDP sessions and usable backends per pool, WATCHDOG=1
// pings (WATCHDOG_USEC set for it), STOPPING=1 and a draining status on
// SIGTERM.
func TestSystemdNotifications(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	u := testnet.StartUDPBackend(t, "u", "")
	path, listen, udpListen := notifyConfig(t, b.Addr, u.Addr)
	systemd := testnet.StartFakeSystemd(t)
	t.Setenv("NOTIFY_SOCKET", systemd.Path)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "")
	p := startL4LB(t, "", nil, "-config", path)
	pid := p.cmd.Process.Pid
	from := func(n testnet.Notification) bool { return n.PID == pid }

	systemd.WaitFor(t, "READY=1 from l4lb", func(n testnet.Notification) bool { return from(n) && n.Has("READY", "1") })
	status := func(want string) {
		t.Helper()
		systemd.WaitFor(t, "STATUS="+want, func(n testnet.Notification) bool { return from(n) && n.Has("STATUS", want) })
	}
	status("0 connections, 0 udp sessions; pools: p 1/1, u 1/1")
	systemd.WaitFor(t, "a watchdog ping", func(n testnet.Notification) bool { return from(n) && n.Has("WATCHDOG", "1") })

	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if tag, err := bufio.NewReader(c).ReadString('\n'); err != nil || tag != "b\n" {
		t.Fatalf("through l4lb: %q %v", tag, err)
	}
	uc, err := net.Dial("udp", udpListen)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	buf := make([]byte, 16)
	testnet.Eventually(t, "a datagram answered through l4lb", func() bool {
		uc.Write([]byte("who"))
		uc.SetReadDeadline(time.Now().Add(time.Second))
		n, err := uc.Read(buf)
		return err == nil && string(buf[:n]) == "u"
	})
	status("1 connection, 1 udp session; pools: p 1/1, u 1/1")

	p.signal(t, syscall.SIGTERM)
	systemd.WaitFor(t, "STOPPING=1", func(n testnet.Notification) bool { return from(n) && n.Has("STOPPING", "1") })
	// UDP sessions end when the drain starts; the TCP client is held open.
	status("draining: 1 connection, 0 udp sessions; pools: p 1/1, u 1/1")
	c.Close()
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// (A ping may have been withheld on a busy machine: 100 ms is short.)
	if log := p.stderr.String(); !strings.Contains(log, "systemd watchdog on") {
		t.Fatalf("want the watchdog on:\n%s", log)
	}
}

// WATCHDOG_PID naming another process (inherited, not meant for l4lb):
// no pings, and no watchdog goroutine.
func TestSystemdWatchdogForAnotherProcess(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	u := testnet.StartUDPBackend(t, "u", "")
	path, _, _ := notifyConfig(t, b.Addr, u.Addr)
	systemd := testnet.StartFakeSystemd(t)
	t.Setenv("NOTIFY_SOCKET", systemd.Path)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "1")
	p := startL4LB(t, "", nil, "-config", path)
	systemd.WaitFor(t, "READY=1", func(n testnet.Notification) bool { return n.Has("READY", "1") })
	// The notifier starts before signals are handled: by STOPPING=1 it has
	// decided about the watchdog.
	p.signal(t, syscall.SIGTERM)
	_, before := systemd.WaitFor(t, "STOPPING=1", func(n testnet.Notification) bool { return n.Has("STOPPING", "1") })
	for _, n := range before {
		if n.Has("WATCHDOG", "1") {
			t.Fatalf("a watchdog ping for WATCHDOG_PID=1")
		}
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if log := p.stderr.String(); strings.Contains(log, "systemd watchdog") {
		t.Fatalf("the watchdog started for another process's WATCHDOG_PID:\n%s", log)
	}
}
