package testnet

import (
	"io"
	"os"
	"path/filepath"
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
	dir, err = os.MkdirTemp("", "l4lb-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
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
