package handoff

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The pid file (run -pidfile FILE) names the process serving now: written
// once it serves, taken over by an upgrade's new process, rewritten by a
// process whose upgrade failed (same pid, new file: l4lb upgrade waits for
// the file to change), removed at exit only while it names the exiting
// process. Each write is a new file renamed into place, so a reader never
// sees half a pid.

// WritePIDFile makes path name pid.
func WritePIDFile(path string, pid int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(tmp, "%d\n", pid)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// ReadPIDFile reads the pid path names.
func ReadPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a pid: %q", path, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// RemovePIDFile removes path if it names pid.
func RemovePIDFile(path string, pid int) {
	if p, err := ReadPIDFile(path); err == nil && p == pid {
		os.Remove(path)
	}
}
