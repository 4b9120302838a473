package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// An l4lb started by socket activation (its listener on the socket
// systemd passed) hands its open connections over at an upgrade like any
// other: the old process is gone within 5 s, the connections relay on in
// the new one, and the new one serves on the activated socket.
func TestHandoverOfAnActivatedProcess(t *testing.T) {
	const conns = 3
	testnet.CheckLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	sock, addr := systemdSocket(t, unix.SOCK_STREAM)
	dir := t.TempDir()
	path, pidfile := filepath.Join(dir, "l4lb.toml"), filepath.Join(dir, "l4lb.pid")
	if err := os.WriteFile(path, fmt.Appendf(nil, `[global]
shutdown_timeout = "2s"
[admin]
listen = ""
[[listener]]
name = "web"
bind = %q
pool = "web"
[pool.web]
[pool.web.health]
enabled = false
[[pool.web.backend]]
addr = %q
`, addr, be.Addr), 0o644); err != nil {
		t.Fatal(err)
	}
	exitAtOnce(t)
	p := startActivated(t, []*os.File{sock}, "self", "-config", path, "-pidfile", pidfile)
	testnet.Eventually(t, "the activated l4lb to write its pid file", func() bool {
		if done, err := exited(p); done {
			t.Fatalf("l4lb exited: %v\n%s", err, p.stderr.String())
		}
		pid, err := handoff.ReadPIDFile(pidfile)
		return err == nil && pid == p.cmd.Process.Pid
	})
	sock.Close() // l4lb holds it: nothing else does
	chain := followChain(t, p.cmd.Process.Pid, pidfile, p.stderr.String)
	fleet := startSeqFleet(t, addr, "b", conns, 100*time.Millisecond)
	fleet.waitEchoedSince(t, time.Now(), "before the upgrade")

	old, served := chain.upgrade(t)
	gone := waitOldGone(t, old, served)
	fleet.waitEchoedSince(t, gone, "after the upgrade (old pid gone)")
	if tag, err := testnet.Hello(addr, ""); err != nil || tag != "b" {
		t.Fatalf("a new client on the activated socket after the upgrade: %q, %v", tag, err)
	}
	fleet.finish(t)
	checkHandedOver(t, chain.logText(), 1, conns, 0)
}
