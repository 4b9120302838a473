package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// waitPIDFile waits until pidfile names p, failing if p exits first.
func waitPIDFile(t *testing.T, p *loggedProc, pidfile string) {
	t.Helper()
	testnet.Eventually(t, "the pid file", func() bool {
		if p.exited() {
			t.Fatalf("l4lb exited: %v", p.cmd.ProcessState)
		}
		pid, err := handoff.ReadPIDFile(pidfile)
		return err == nil && pid == p.cmd.Process.Pid
	})
}

// upgradeToScript installs at bin a script that writes its pid to
// dir/next.pid and then runs then (a shell command), signals p to
// upgrade, and returns the script's pid once it runs: the upgrade's new
// process, killed when the test ends.
func upgradeToScript(t *testing.T, p *loggedProc, bin, dir, then string) int {
	t.Helper()
	nextPID := filepath.Join(dir, "next.pid")
	installBytes(t, fmt.Appendf(nil, "#!/bin/sh\necho $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s\n%[2]s\n", nextPID, then), bin, 0o755)
	p.signal(t, syscall.SIGUSR2)
	var next int
	testnet.Eventually(t, "the upgrade's new process", func() bool {
		var err error
		next, err = handoff.ReadPIDFile(nextPID)
		return err == nil
	})
	t.Cleanup(func() {
		syscall.Kill(next, syscall.SIGKILL)
		testnet.Eventually(t, "the new process to be gone", func() bool { return processGone(next) })
	})
	return next
}

// While a binary upgrade is under way, a reload through the admin API is
// refused as SIGHUP is (logged and ignored): 409, saying an upgrade is
// under way, the running configuration untouched and nothing counted. The
// new process reads the file itself, and a reload would change what the
// old one hands over while it hands it over. Once the attempt fails, the
// API reloads again.
func TestAPIReloadRefusedDuringUpgrade(t *testing.T) {
	testnet.CheckLeaks(t)
	dir := t.TempDir()
	exe := l4lbBin
	bin := filepath.Join(dir, "l4lb")
	install(t, exe, bin)
	be := testnet.StartBackend(t, "b", "")
	path, listen, adminAddr := e2eutil.WriteConfig(t, dir, []string{be.Addr}, "")
	pidfile := filepath.Join(dir, "l4lb.pid")
	p := startLogged(t, bin, "-config", path, "-pidfile", pidfile, "-upgrade-timeout", "10m")
	waitPIDFile(t, p, pidfile)
	if code, msg := e2eutil.PostReload(t, adminAddr); code != http.StatusOK {
		t.Fatalf("reload before the upgrade: %d %q, want 200", code, msg)
	}

	// The new executable says where it runs, then never becomes ready:
	// the upgrade stays under way until the test ends it.
	next := upgradeToScript(t, p, bin, dir, "exec sleep 600")

	code, msg := e2eutil.PostReload(t, adminAddr)
	if code != http.StatusConflict || !strings.Contains(msg, "upgrade is under way") {
		t.Fatalf("reload during the upgrade: %d %q, want 409 saying an upgrade is under way", code, msg)
	}
	// SIGHUP meanwhile, as before: logged and ignored.
	p.signal(t, syscall.SIGHUP)
	testnet.Eventually(t, "SIGHUP to be ignored", func() bool {
		return strings.Contains(p.logText(), "signal ignored while an upgrade is under way")
	})
	if n := strings.Count(p.logText(), "reload refused"); n != 1 {
		t.Fatalf("%d refused reloads logged, want 1", n)
	}
	if ok, failed := e2eutil.Metric(t, adminAddr, `l4lb_config_reloads_total{result="ok"}`), e2eutil.Metric(t, adminAddr, `l4lb_config_reloads_total{result="failed"}`); ok != 1 || failed != 0 {
		t.Fatalf("reloads counted ok %v, failed %v; want the one before the upgrade only", ok, failed)
	}

	// The attempt fails: this process serves on, and reloads again.
	if err := syscall.Kill(next, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the attempt to fail", func() bool {
		return strings.Contains(p.logText(), "upgrade failed: the new process exited before it was ready")
	})
	testnet.Eventually(t, "the API to reload again", func() bool {
		code, _ := e2eutil.PostReload(t, adminAddr)
		return code == http.StatusOK
	})
	if tag, err := testnet.Hello(listen, ""); err != nil || tag != "b" {
		t.Fatalf("after the failed upgrade: %q, %v", tag, err)
	}
	p.signal(t, syscall.SIGTERM)
	testnet.Eventually(t, "l4lb to exit", p.exited)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("l4lb: %v, want exit 0", p.cmd.ProcessState)
	}
}
