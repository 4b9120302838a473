package main

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// l4lb upgrade's command line: which process, and what it says.
func TestUpgradeCommandLine(t *testing.T) {
	t.Setenv("MAINPID", "")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pid")
	os.WriteFile(bad, []byte("twelve\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no process", nil, 2, "give -pidfile FILE or -pid PID"},
		{"both", []string{"-pid", "12", "-pidfile", bad}, 2, "give one"},
		{"a missing pid file", []string{"-pidfile", filepath.Join(dir, "none.pid")}, 1, "no such file"},
		{"a pid file without a pid", []string{"-pidfile", bad}, 1, `not a pid: "twelve"`},
		{"init", []string{"-pid", "1"}, 1, "not an l4lb process"},
		{"an argument", []string{"now"}, 2, `unexpected argument "now"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"upgrade"}, tc.args...), &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d saying %q", code, errb.String(), tc.code, tc.want)
			}
		})
	}
	// $MAINPID, as systemd sets it: the signal is sent, and that is all
	// upgrade can say without a pid file.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	t.Setenv("MAINPID", strconv.Itoa(sleeper.Process.Pid))
	var out, errb bytes.Buffer
	if code := run([]string{"upgrade"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "sent SIGUSR2 to pid") {
		t.Fatalf("exit %d, %q %q", code, out.String(), errb.String())
	}
	err := sleeper.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGUSR2 {
		t.Fatalf("the process got no SIGUSR2: %v", err)
	}
}

// startTakingOver starts an instance on the file at path as an
// upgrade's new process from pid 4242 (with no state handed over), not
// yet serving; it stops when the test ends.
func startTakingOver(t *testing.T, path string) *instance {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inh := handoff.None()
	inh.From, inh.Parent = "upgrade", 4242
	in, err := startInherited(cfg, slog.New(slog.DiscardHandler), inh)
	if err != nil {
		t.Fatal(err)
	}
	in.useFile(path)
	t.Cleanup(in.stop)
	return in
}

// An upgrade's new process shares the admin socket with the old one from
// the moment it listens, before it serves: until then it refuses actions
// and reloads (409), which the old process, still the one that serves,
// would not see; once serving it takes them.
func TestUpgradeNewProcessRefusesActionsUntilItServes(t *testing.T) {
	testnet.CheckLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	path, _, adminAddr := e2eutil.WriteConfig(t, "", []string{be.Addr}, "")
	in := startTakingOver(t, path)
	disable := "http://" + adminAddr + "/api/v1/pools/p/backends/" + be.Addr + "/disable"
	if code, msg := e2eutil.PostJSONError(t, disable); code != http.StatusConflict || !strings.Contains(msg, "taking over from pid 4242") {
		t.Fatalf("disable before serving: %d %q, want 409 saying why", code, msg)
	}
	if code, msg := e2eutil.PostReload(t, adminAddr); code != http.StatusConflict || !strings.Contains(msg, "taking over from pid 4242") {
		t.Fatalf("reload before serving: %d %q, want 409 saying why", code, msg)
	}
	in.serving()
	if code, msg := e2eutil.PostJSONError(t, disable); code != http.StatusOK {
		t.Fatalf("disable once serving: %d %q, want 200", code, msg)
	}
	if code, msg := e2eutil.PostReload(t, adminAddr); code != http.StatusOK {
		t.Fatalf("reload once serving: %d %q, want 200", code, msg)
	}
}
