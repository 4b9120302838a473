package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// startConfigText is a one-pool configuration; with extra set, a second
// listener the running process only gets by a reload or an upgrade.
func startConfigText(front, extra, admin, backend string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global]\nshutdown_timeout = \"20s\"\n[admin]\nlisten = %q\n[log]\nlevel = \"debug\"\n", admin)
	fmt.Fprintf(&b, "[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", front)
	if extra != "" {
		fmt.Fprintf(&b, "[[listener]]\nname = \"extra\"\nbind = %q\npool = \"p\"\n", extra)
	}
	fmt.Fprintf(&b, "[pool.p]\nalgorithm = \"round-robin\"\n[[pool.p.backend]]\naddr = %q\n", backend)
	return b.String()
}

// signalPending reports whether sig waits, not yet delivered, for the
// process pid (kill(2) makes it pending for the whole process).
func signalPending(t *testing.T, pid int, sig syscall.Signal) bool {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false // gone: nothing pending any more
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: %q: %v", pid, line, err)
			}
			return mask&(1<<(uint(sig)-1)) != 0
		}
	}
	t.Fatalf("/proc/%d/status has no ShdPnd line", pid)
	return false
}

// loggedProc is an l4lb started with its output in a file: Wait then
// does not wait for an upgrade's new process, which holds the same output.
type loggedProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startLogged(t *testing.T, bin string, args ...string) *loggedProc {
	t.Helper()
	dir := t.TempDir()
	p := &loggedProc{log: filepath.Join(dir, "l4lb.log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the process has its own
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("l4lb log:\n%s", p.logText())
		}
	})
	return p
}

func (p *loggedProc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *loggedProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil {
		t.Fatal(err)
	}
}

func (p *loggedProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// A signal that comes while l4lb starts must not kill it. SIGHUP and
// SIGUSR2 end a process that has not subscribed to them (their default
// action), so `systemctl reload` or a configuration tool's SIGHUP right
// after the start, or an l4lb upgrade, killed the balancer while it read
// its file, an upgrade's state or built its pools. Here l4lb's
// configuration file is a FIFO the test holds: l4lb is held inside reading
// it, at its start, when the signal comes. Each signal then acts once l4lb
// serves: SIGHUP reloads (the file may have changed since it was read),
// SIGUSR2 upgrades, SIGTERM drains and exits 0.
func TestSignalDuringStartActsOnceServing(t *testing.T) {
	testnet.CheckLeaks(t)
	exe := l4lbBin
	be := testnet.StartBackend(t, "b", "")
	for _, tc := range []struct {
		name   string
		before []syscall.Signal // sent first, each delivered before the next
		sig    syscall.Signal
		check  func(t *testing.T, p *loggedProc, pidfile, front, extra string)
	}{
		{"SIGHUP", nil, syscall.SIGHUP, func(t *testing.T, p *loggedProc, pidfile, front, extra string) {
			waitLoggedAccepting(t, p, front)
			// The file read at the start had no extra listener; the
			// reload the signal asked for reads the one now there.
			waitLoggedAccepting(t, p, extra)
			// The reload logs once it has swapped: after the new
			// listener already accepts.
			testnet.Eventually(t, "the reload to be logged", func() bool {
				return strings.Contains(p.logText(), "configuration reloaded")
			})
			if n := strings.Count(p.logText(), "configuration reloaded"); n != 1 {
				t.Fatalf("%d reloads logged, want 1", n)
			}
		}},
		{"SIGUSR2", nil, syscall.SIGUSR2, func(t *testing.T, p *loggedProc, pidfile, front, extra string) {
			var next int
			testnet.Eventually(t, "the pid file to name the upgrade's new process", func() bool {
				exited := p.exited() // before the file: an old one exits once it handed over
				if next, _ = handoff.ReadPIDFile(pidfile); next > 0 && next != p.cmd.Process.Pid {
					return true
				}
				if exited {
					t.Fatalf("l4lb exited without an upgrade: %v", p.cmd.ProcessState)
				}
				return false
			})
			t.Cleanup(func() {
				syscall.Kill(next, syscall.SIGKILL)
				testnet.Eventually(t, "the new process to be gone", func() bool { return processGone(next) })
			})
			testnet.Eventually(t, "the old process to drain and exit", p.exited)
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("old process: %v, want exit 0 after the hand-over", p.cmd.ProcessState)
			}
			// The new process read the file as it is now.
			for _, addr := range []string{front, extra} {
				if tag, err := testnet.Hello(addr, ""); err != nil || tag != "b" {
					t.Fatalf("the new process on %s: %q, %v", addr, tag, err)
				}
			}
			if !strings.Contains(p.logText(), "upgrade: the new process serves") {
				t.Fatal("the log does not say the upgrade handed over")
			}
		}},
		{"SIGTERM", nil, syscall.SIGTERM, checkStoppedBySIGTERM},
		// A burst of reloads must not crowd the stop out: signal.Notify
		// drops what its channel has no room for, and a SIGTERM lost
		// leaves systemd waiting out its stop timeout.
		{"SIGHUPs then SIGTERM", slices.Repeat([]syscall.Signal{syscall.SIGHUP}, 8), syscall.SIGTERM,
			func(t *testing.T, p *loggedProc, pidfile, front, extra string) {
				checkStoppedBySIGTERM(t, p, pidfile, front, extra)
				// The stop goes first; at most one reload ran, if the stop
				// reached the inbox only after l4lb took the first SIGHUP.
				if n := strings.Count(p.logText(), "configuration reloaded"); n > 1 {
					t.Fatalf("%d reloads logged for 8 SIGHUPs waiting together, want at most 1", n)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, pidfile := filepath.Join(dir, "l4lb.toml"), filepath.Join(dir, "l4lb.pid")
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
			front, extra, admin := testnet.FreeAddr(t), testnet.FreeAddr(t), testnet.FreeAddr(t)
			p := startLogged(t, exe, "-config", path, "-pidfile", pidfile)
			// A FIFO opens for writing without blocking once a reader has
			// it open: then l4lb is inside reading its file.
			w := -1
			testnet.Eventually(t, "l4lb to open its configuration file", func() bool {
				if p.exited() {
					t.Fatalf("l4lb exited before reading its file: %v", p.cmd.ProcessState)
				}
				var err error
				w, err = unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
				return err == nil
			})
			defer func() {
				if w >= 0 {
					unix.Close(w)
				}
			}()
			for _, sig := range append(tc.before, tc.sig) {
				p.signal(t, sig)
				testnet.Eventually(t, "the signal to be delivered", func() bool {
					return !signalPending(t, p.cmd.Process.Pid, sig)
				})
			}
			// The file l4lb reads now; then the path is a regular file
			// with one listener more, for whatever reads it next.
			if _, err := unix.Write(w, []byte(startConfigText(front, "", admin, be.Addr))); err != nil && err != unix.EPIPE {
				t.Fatal(err)
			}
			installBytes(t, []byte(startConfigText(front, extra, admin, be.Addr)), path, 0o644)
			unix.Close(w)
			w = -1
			testnet.Eventually(t, "l4lb to start", func() bool {
				if p.exited() && !strings.Contains(p.logText(), "l4lb running") {
					t.Fatalf("l4lb did not survive the %s that came during its start: %v", unix.SignalName(tc.sig), p.cmd.ProcessState)
				}
				return strings.Contains(p.logText(), "l4lb running")
			})
			tc.check(t, p, pidfile, front, extra)
		})
	}
}

// checkStoppedBySIGTERM: l4lb served, then drained and exited 0 on the
// SIGTERM.
func checkStoppedBySIGTERM(t *testing.T, p *loggedProc, pidfile, front, extra string) {
	testnet.Eventually(t, "l4lb to exit", p.exited)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("l4lb: %v, want exit 0 after a drain", p.cmd.ProcessState)
	}
	log := p.logText()
	for _, want := range []string{"l4lb running", "shutting down", "signal=terminated"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %q", want)
		}
	}
}

// waitLoggedAccepting waits until addr accepts a TCP connection from l4lb,
// failing the test if l4lb exits first.
func waitLoggedAccepting(t *testing.T, p *loggedProc, addr string) {
	t.Helper()
	testnet.Eventually(t, "l4lb to accept on "+addr, func() bool {
		if p.exited() {
			t.Fatalf("l4lb exited: %v", p.cmd.ProcessState)
		}
		tag, err := testnet.Hello(addr, "")
		return err == nil && tag == "b"
	})
}
