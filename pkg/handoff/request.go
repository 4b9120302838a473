package handoff

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Request is l4lb upgrade's side of an upgrade: which process to ask (the
// one its pid file names, or PID, or $MAINPID as systemd sets it), and
// with a pid file how long to wait for the outcome.
type Request struct {
	PIDFile string
	PID     int
	Wait    time.Duration
}

// UsageError is a Request that names no process, or two.
type UsageError string

func (e UsageError) Error() string { return string(e) }

// Send sends the running l4lb SIGUSR2 and, with a pid file, waits for the
// outcome (Await); it says on w what happened. The error is a UsageError
// when the request names no process or two.
func (r Request) Send(w io.Writer) error {
	target, how := r.PID, "-pid"
	var before os.FileInfo
	switch {
	case r.PID != 0 && r.PIDFile != "":
		return UsageError("-pid and -pidfile: give one")
	case r.PIDFile != "":
		var err error
		if before, err = os.Stat(r.PIDFile); err == nil {
			target, err = ReadPIDFile(r.PIDFile)
		}
		if err != nil {
			return err
		}
		how = r.PIDFile
	case r.PID == 0:
		v := os.Getenv("MAINPID")
		p, err := strconv.Atoi(v)
		if v == "" || err != nil || p <= 0 {
			return UsageError("which l4lb? give -pidfile FILE or -pid PID (or run it with $MAINPID set, as systemd does)")
		}
		target, how = p, "$MAINPID"
	}
	if target <= 1 {
		return fmt.Errorf("%d is not an l4lb process", target)
	}
	if err := unix.Kill(target, unix.SIGUSR2); err != nil {
		return fmt.Errorf("signal pid %d (from %s): %w", target, how, err)
	}
	if r.PIDFile == "" {
		fmt.Fprintf(w, "sent SIGUSR2 to pid %d; its log says whether the new process took over\n", target)
		return nil
	}
	next, err := Await(r.PIDFile, before, target, r.Wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "upgraded: pid %d serves; pid %d hands its connections over and exits\n", next, target)
	return nil
}

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
