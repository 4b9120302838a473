package main

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

// cmdUpgrade is l4lb upgrade: send the running l4lb SIGUSR2, which makes
// it start the executable at its path with the listening sockets and its
// state, and, with a pid file, wait for the outcome.
func cmdUpgrade(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("upgrade", "[-pidfile FILE | -pid PID] [-wait DURATION]",
		`Ask the running l4lb to replace itself with the executable now at the path
it was started from (SIGUSR2). It keeps serving until the new process serves,
hands it every listening socket, breaker state, disables and health, then
stops accepting and drains. A new process that fails leaves it serving.

The process is the one in -pidfile (the file l4lb run -pidfile writes), or
-pid, or $MAINPID (set by systemd for ExecReload= and the like). With
-pidfile, upgrade waits until the file names the new process (exit 0) or
is rewritten by the old one after a failed attempt (exit 1, the old
process's log says why).`, stderr)
	pidfile := fs.String("pidfile", "", "the running l4lb's pid file")
	pidFlag := fs.Int("pid", 0, "the running l4lb's pid")
	wait := fs.Duration("wait", defaultUpgradeTimeout+30*time.Second, "with -pidfile: how long to wait for the outcome")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "l4lb upgrade: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	target, how := *pidFlag, "-pid"
	var before os.FileInfo
	switch {
	case *pidFlag != 0 && *pidfile != "":
		fmt.Fprintln(stderr, "l4lb upgrade: -pid and -pidfile: give one")
		return 2
	case *pidfile != "":
		var err error
		if before, err = os.Stat(*pidfile); err == nil {
			target, err = readPIDFile(*pidfile)
		}
		if err != nil {
			fmt.Fprintf(stderr, "l4lb upgrade: %v\n", err)
			return 1
		}
		how = *pidfile
	case *pidFlag == 0:
		v := os.Getenv("MAINPID")
		p, err := strconv.Atoi(v)
		if v == "" || err != nil || p <= 0 {
			fmt.Fprintln(stderr, "l4lb upgrade: which l4lb? give -pidfile FILE or -pid PID (or run it with $MAINPID set, as systemd does)")
			return 2
		}
		target, how = p, "$MAINPID"
	}
	if target <= 1 {
		fmt.Fprintf(stderr, "l4lb upgrade: %d is not an l4lb process\n", target)
		return 1
	}
	if err := unix.Kill(target, unix.SIGUSR2); err != nil {
		fmt.Fprintf(stderr, "l4lb upgrade: signal pid %d (from %s): %v\n", target, how, err)
		return 1
	}
	if *pidfile == "" {
		fmt.Fprintf(stdout, "sent SIGUSR2 to pid %d; its log says whether the new process took over\n", target)
		return 0
	}
	deadline := time.Now().Add(*wait)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		now, err := os.Stat(*pidfile)
		if err != nil || os.SameFile(before, now) {
			continue // not rewritten yet
		}
		p, err := readPIDFile(*pidfile)
		if err != nil {
			continue
		}
		if p == target {
			fmt.Fprintf(stderr, "l4lb upgrade: failed: pid %d is still serving; its log says why\n", target)
			return 1
		}
		if err := unix.Kill(p, 0); err != nil && !errors.Is(err, syscall.EPERM) {
			fmt.Fprintf(stderr, "l4lb upgrade: %s names pid %d, which is gone\n", *pidfile, p)
			return 1
		}
		fmt.Fprintf(stdout, "upgraded: pid %d serves; pid %d drains its connections and exits\n", p, target)
		return 0
	}
	fmt.Fprintf(stderr, "l4lb upgrade: no outcome within %v: %s still names pid %d (is it an l4lb run with -pidfile %s?)\n",
		*wait, *pidfile, target, *pidfile)
	return 1
}
