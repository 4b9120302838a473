package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// cmdUpgrade is l4lb upgrade: send the running l4lb SIGUSR2, which makes
// it start the executable at its path with the listening sockets and its
// state, and, with a pid file, wait for the outcome.
func cmdUpgrade(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("upgrade", "[-pidfile FILE | -pid PID] [-wait DURATION]",
		`Ask the running l4lb to replace itself with the executable now at the path
it was started from (SIGUSR2). It keeps serving until the new process serves,
hands it every listening socket, breaker state, disables and health, then
stops accepting, hands it every established connection and exits. A new
process that fails leaves it serving.

The process is the one in -pidfile (the file l4lb run -pidfile writes), or
-pid, or $MAINPID (set by systemd for ExecReload= and the like). With
-pidfile, upgrade waits until the file names the new process (exit 0) or
is rewritten by the old one after a failed attempt (exit 1, the old
process's log says why).`, stderr)
	pidfile := fs.String("pidfile", "", "the running l4lb's pid file")
	pidFlag := fs.Int("pid", 0, "the running l4lb's pid")
	wait := fs.Duration("wait", handoff.DefaultTimeout+30*time.Second, "with -pidfile: how long to wait for the outcome")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "l4lb upgrade: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	err := handoff.Request{PIDFile: *pidfile, PID: *pidFlag, Wait: *wait}.Send(stdout)
	var usage handoff.UsageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "l4lb upgrade: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "l4lb upgrade: %v\n", err)
		return 1
	}
	return 0
}

// runUpgrade is what l4lb run's command line and environment give
// serveUntilSignal for upgrades (l4lb demo runs without).
var runUpgrade upgradeOptions

type upgradeOptions struct {
	pidfile   string
	timeout   time.Duration
	inherited *handoff.Inheritance // taken once
}

// take returns the upgrader and the inheritance for this process's start.
func (o *upgradeOptions) take(log *slog.Logger) (*handoff.Upgrader, *handoff.Inheritance) {
	inh := o.inherited
	o.inherited = nil
	if inh == nil {
		inh = handoff.None()
	}
	return handoff.NewUpgrader(o.pidfile, o.timeout, versionString(), log), inh
}

// upgrade runs one binary upgrade of in (handoff.Upgrader.Attempt). ok:
// the new process serves, and in has stopped watching its listeners and
// closed its admin endpoint; the caller hands its connections over
// (handoff.Upgrader.HandOverFlows), drains what stays and exits. Otherwise in
// goes on serving; stop is a SIGTERM or SIGINT that came meanwhile.
// commit runs once the new process serves.
func (in *instance) upgrade(up *handoff.Upgrader, sigs <-chan os.Signal, commit func()) (ok bool, stop os.Signal) {
	ok, stop = up.Attempt(handoff.Window{
		Refuse: in.config,
		Offer:  in.offer,
		Commit: commit,
	}, sigs)
	if ok {
		in.server.Unwatch()
		if in.admin != nil {
			in.admin.Close()
		}
	}
	return ok, stop
}

// offer is what in hands its successor: its listening sockets (the
// listeners', then the admin endpoint's), and its breaker store unless it
// is a fleet's.
func (in *instance) offer() (handoff.Offer, error) {
	socks, err := in.server.HandoffSockets()
	if err != nil {
		return handoff.Offer{}, err
	}
	of := handoff.Offer{Sockets: make([]int, 0, len(socks)+1), Pools: in.livePools, Members: in.members}
	for _, s := range socks {
		of.Sockets = append(of.Sockets, s.FD)
	}
	if in.admin != nil {
		fd, err := in.admin.DupListener()
		if err != nil {
			for _, fd := range of.Sockets {
				unix.Close(fd)
			}
			return handoff.Offer{}, fmt.Errorf("admin endpoint: %w", err)
		}
		of.Sockets = append(of.Sockets, fd)
	}
	if ms, ok := in.store.store.(*breaker.MemoryStore); ok {
		of.Store = ms
	}
	return of, nil
}
