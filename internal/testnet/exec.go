package testnet

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ExecutableCopy copies the running test binary into a fresh directory
// that any user may read and execute, and returns the copy's path and its
// directory (removed when the test ends). The go tool builds tests in a
// directory private to the user running them, so a test that re-runs
// itself as an unprivileged user needs this.
func ExecutableCopy(t testing.TB) (path, dir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return CopyExecutable(t, self)
}

// CopyExecutable is ExecutableCopy of the executable at self (a binary a
// test built, say).
func CopyExecutable(t testing.TB, self string) (path, dir string) {
	t.Helper()
	dir = OpenTempDir(t, "l4lb-test-")
	path = filepath.Join(dir, filepath.Base(self))
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// RunChildAs re-runs the test binary as uid (group uid too), running only
// the test named child with env set to "1" in an otherwise empty
// environment, logs its output, and fails t unless the child passed. A
// test that must run unprivileged uses it when it finds itself root; the
// child test skips unless env is set.
func RunChildAs(t testing.TB, uid int, env, child string) {
	t.Helper()
	bin, dir := ExecutableCopy(t)
	cmd := exec.Command(bin, "-test.run=^"+child+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{env + "=1", "PATH=/usr/bin:/bin", "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.CombinedOutput()
	t.Logf("child as uid %d:\n%s", uid, out)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+child) {
		t.Fatalf("unprivileged run failed: %v", err)
	}
}

// OpenTempDir is a directory of the test's own (removed when it ends)
// that every user may enter, for a process that drops root (l4lb as
// nobody, dnsmasq): t.TempDir's is its owner's alone.
func OpenTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
