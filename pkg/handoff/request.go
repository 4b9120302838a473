package handoff

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Await is l4lb upgrade's wait for the outcome of an upgrade it asked pid
// old for: the pid file (before is its state when the signal was sent) is
// rewritten by the new process once it serves, or by the old one after a
// failed attempt. It returns the new process's pid, or an error saying
// what happened.
func Await(pidfile string, before os.FileInfo, old int, wait time.Duration) (int, error) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		now, err := os.Stat(pidfile)
		if err != nil || os.SameFile(before, now) {
			continue // not rewritten yet
		}
		p, err := ReadPIDFile(pidfile)
		if err != nil {
			continue
		}
		if p == old {
			return 0, fmt.Errorf("failed: pid %d is still serving; its log says why", old)
		}
		if err := unix.Kill(p, 0); err != nil && !errors.Is(err, syscall.EPERM) {
			return 0, fmt.Errorf("%s names pid %d, which is gone", pidfile, p)
		}
		return p, nil
	}
	return 0, fmt.Errorf("no outcome within %v: %s still names pid %d (is it an l4lb run with -pidfile %s?)",
		wait, pidfile, old, pidfile)
}
