package testnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Network namespaces of a test's own, for tests whose nft rules must touch
// nothing of the host: the test binary re-runs itself inside the namespace
// (as pool's netns tests do), so everything the inner test starts (servers,
// l4lb processes, redis-server) and every rule it adds lives there.

// NeedNetns skips the test unless it runs as root; as root, ip and nft
// (and any further tools named, from iproute2 or nftables) must be there
// (NeedTool).
func NeedNetns(t testing.TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables")
	}
	needNetnsTools(t, tools)
}

// RequireNetns is NeedNetns for the headline tests (RequireRoot): without
// root they fail rather than skip.
func RequireNetns(t testing.TB, tools ...string) {
	t.Helper()
	RequireRoot(t, "network namespaces and nftables")
	needNetnsTools(t, tools)
}

func needNetnsTools(t testing.TB, tools []string) {
	t.Helper()
	for _, tool := range append([]string{"ip", "nft"}, tools...) {
		pkg := "iproute2"
		if tool == "nft" {
			pkg = "nftables"
		}
		NeedTool(t, tool, pkg)
	}
}

// netnsSeq makes namespace names unique within the process (-count=N runs
// a test again under the same pid).
var netnsSeq atomic.Int64

// RunInNetns creates a network namespace (loopback up), runs the test
// binary inside it with only the test named child (-test.run=^child$, -v,
// -count=1, -test.timeout=timeout) and env=1 added to the environment, logs
// the child's output, and fails t unless the child passed; a child that
// skipped makes t skip with the child's output. The child runs in a
// process group of its own: whatever is left of it after it exits or runs
// out of time (timeout, cut short to fit the parent's own deadline, plus
// 20s) is killed with the group before the namespace is deleted. The child
// test must skip when env is not set.
func RunInNetns(t testing.TB, env, child string, timeout time.Duration) {
	t.Helper()
	NeedNetns(t)
	ns := fmt.Sprintf("l4lbt-%d-%d", os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	if out, err := exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("loopback up in %s: %v\n%s", ns, err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Within the parent's own deadline (go test -timeout), so the parent
	// is left the time to kill what remains and delete the namespace.
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			if left := time.Until(d) - 30*time.Second; left < timeout {
				timeout = max(left, time.Second)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, self,
		"-test.run=^"+child+"$", "-test.v", "-test.count=1", "-test.timeout="+timeout.String())
	cmd.Env = append(os.Environ(), env+"=1")
	// ip netns exec execs the test binary in place: its pid leads the
	// group, and what it starts without a group of its own joins it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer // one writer for both: exec writes it from one goroutine at a time
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	// Anything of the child's still running (it died before its cleanups).
	if kerr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); kerr == nil {
		t.Errorf("processes of the child's group outlived it in %s; killed", ns)
	} else if !errors.Is(kerr, syscall.ESRCH) {
		t.Errorf("killing the child's group: %v", kerr)
	}
	text := out.String()
	if err == nil && strings.Contains(text, "--- SKIP: "+child) {
		t.Skipf("inside namespace %s the test skipped:\n%s", ns, text)
	}
	t.Logf("inside namespace %s:\n%s", ns, text)
	if err != nil || !strings.Contains(text, "--- PASS: "+child) {
		t.Fatalf("%s failed inside namespace %s: %v", child, ns, err)
	}
}
