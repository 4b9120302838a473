package handoff

import (
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/membership"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/sdnotify"
)

// Binary upgrade, the old process's side (SIGUSR2, or l4lb upgrade which
// sends it): start the executable at the path this process was started
// from, re-read from disk, with the same arguments, every listening socket
// (the listeners' and the admin endpoint's) and the state document
// (state.go); wait until it says it serves; then stop accepting and
// drain. Until then this process serves as before, and if the new one
// fails (exits, or is not ready within the timeout, when it is killed)
// nothing changes but a log line. inherit.go is the new process's side.

// DefaultTimeout bounds the wait for the new process to be ready.
const DefaultTimeout = time.Minute

// Upgrader runs a process's upgrades, and keeps its pid file.
type Upgrader struct {
	exe     string   // the path to start (not resolved through symlinks)
	args    []string // this process's arguments
	timeout time.Duration
	pidfile string // "" : none
	version string // this build's, written in the state document
	log     *slog.Logger
	feed    *breakerFeed // after a hand-over, to the new process; nil: none
	flows   *flowsConn   // after a hand-over, to pass connections on (HandOverFlows); nil: none
	// reporter tells the new process what this one holds, once its
	// connections are handed over, until it exits; nil: none.
	reporter *openReporter
}

// NewUpgrader is the upgrader of this process: pidfile is run -pidfile
// ("": none), timeout the wait for a new process to serve (0: the
// default), version this build's.
func NewUpgrader(pidfile string, timeout time.Duration, version string, log *slog.Logger) *Upgrader {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Upgrader{exe: executablePath(), args: os.Args[1:], timeout: timeout, pidfile: pidfile, version: version, log: log}
}

// Started is called once this process serves: it takes the pid file and,
// when it is an upgrade's new process, tells the old one.
func (u *Upgrader) Started(inh *Inheritance) {
	if u.pidfile != "" {
		if err := WritePIDFile(u.pidfile, os.Getpid()); err != nil {
			u.log.Warn("cannot write the pid file", "pidfile", u.pidfile, "error", err)
		}
	}
	inh.TellReady(u.log)
}

// Exiting writes the breaker changes still due to the new process, and
// removes the pid file if it still names this process (after an upgrade
// it names the new one).
func (u *Upgrader) Exiting() {
	if u.flows != nil { // an upgrade whose connections were not handed over
		u.flows.close()
		u.flows = nil
	}
	u.reporter.end()
	u.reporter = nil
	u.feed.stop(feedFlushGrace) // the drain's last trips too
	if u.pidfile != "" {
		RemovePIDFile(u.pidfile, os.Getpid())
	}
}

// Offer is what a process hands its successor.
type Offer struct {
	// Sockets are the listening sockets, the listeners' then the admin
	// endpoint's: fds of the caller's, which Attempt closes.
	Sockets []int
	// Store is the process's own breaker store; nil with a fleet's.
	Store *breaker.MemoryStore
	// Pools are the pools serving now; called once the feed follows the
	// store, for the state document.
	Pools func() []*pool.Pool
	// Members are the pools' API-added and discovered backends (nil:
	// none), for the state document.
	Members *membership.Set
}

// Refuser refuses reloads and operators' actions, saying why, until the
// returned allow is called (admin.ConfigState).
type Refuser interface {
	RefuseReloads(why string) (allow func())
	RefuseActions(why string) (allow func())
}

// Window is how the caller serves while an attempt is under way.
type Window struct {
	// Refuse takes no reload while the new process starts: it reads the
	// file itself, and a reload would change what this one hands over
	// (a SIGHUP meanwhile is logged and ignored; a process that handed
	// over never reloads again). Nor an operator's action: the new process
	// starts from the state taken at the start, so a disable made after
	// it would be undone there. Both are allowed again once the attempt
	// failed, before the pid file says so.
	Refuse Refuser
	// Offer is what to hand over.
	Offer func() (Offer, error)
	// Commit runs once the new process serves, before systemd is told it
	// is the main process (the caller stops its own notifications there).
	Commit func()
}

// Attempt runs one upgrade. ok: the new process serves; the caller stops
// accepting, closes its admin endpoint, hands its connections over
// (HandOverFlows), drains what stays and exits. Otherwise this
// process goes on serving; stop is a SIGTERM or SIGINT that arrived
// meanwhile (the attempt was abandoned for it), for the caller to act on.
// Every other signal from sigs is logged and ignored until the outcome.
func (u *Upgrader) Attempt(w Window, sigs <-chan os.Signal) (ok bool, stop os.Signal) {
	start := time.Now()
	allowReloads := w.Refuse.RefuseReloads("a binary upgrade is under way; the new process reads the configuration file itself (reload again if the upgrade fails)")
	allowActions := w.Refuse.RefuseActions("a binary upgrade is under way; the new process takes over this one's state (act on the new process once it serves, or again here if the upgrade fails)")
	finished := func() {
		allowActions()
		allowReloads()
		u.finished()
	}
	u.log.Info("upgrade: starting the new executable", "path", u.exe)
	child, err := u.spawn(w.Offer)
	if err != nil {
		u.log.Error("upgrade failed: cannot start the new process; this one goes on serving", "path", u.exe, "error", err)
		finished()
		return false, nil
	}
	defer child.release()
	timer := time.NewTimer(u.timeout)
	defer timer.Stop()
	fail := func(why string, args ...any) {
		child.kill()
		child.feed.stop(0)
		args = append([]any{"new_pid", child.pid, "path", u.exe}, args...)
		u.log.Error("upgrade failed: "+why+"; this one goes on serving", args...)
		finished()
	}
	for {
		select {
		case r := <-child.ready:
			if r.err != nil {
				// The pipe closed without a word: the new process is
				// exiting (its own log says why); wait for its status.
				select {
				case <-child.exited:
					fail("the new process exited before it was ready", "status", exitStatus(child.status))
				case <-time.After(5 * time.Second):
					fail("the new process closed its readiness pipe without being ready", "error", r.err)
				}
				return false, nil
			}
			select {
			case <-child.exited: // said it serves, then died: keep serving
				fail("the new process exited right after it said it was ready", "status", exitStatus(child.status))
				return false, nil
			default:
			}
			u.log.Info("upgrade: the new process serves; this one stops accepting and hands its connections over",
				"new_pid", child.pid, "took", time.Since(start).Round(time.Millisecond).String())
			// systemd follows the new process; this one says nothing more.
			w.Commit()
			u.feed = child.feed // until this process exits
			u.flows, child.flows = child.flows, nil
			if err := sdnotify.Notify("MAINPID=" + strconv.Itoa(child.pid)); err != nil {
				u.log.Warn("cannot notify systemd", "error", err)
			}
			return true, nil
		case <-child.exited:
			fail("the new process exited before it was ready", "status", exitStatus(child.status))
			return false, nil
		case <-timer.C:
			fail("the new process was not ready in time (killed)", "timeout", u.timeout.String())
			return false, nil
		case sig := <-sigs:
			switch sig {
			case syscall.SIGTERM, syscall.SIGINT:
				fail("a stop signal came first (the new process killed)", "signal", sig.String())
				return false, sig
			case syscall.SIGUSR2:
				u.log.Warn("SIGUSR2 ignored: an upgrade is already under way", "new_pid", child.pid)
			default:
				u.log.Warn("signal ignored while an upgrade is under way", "signal", sig.String(), "new_pid", child.pid)
			}
		}
	}
}

// finished rewrites the pid file after a failed attempt (the same pid,
// a new file), so l4lb upgrade, which waits for the file to change, learns
// the attempt is over.
func (u *Upgrader) finished() {
	if u.pidfile != "" {
		if err := WritePIDFile(u.pidfile, os.Getpid()); err != nil {
			u.log.Warn("cannot write the pid file", "pidfile", u.pidfile, "error", err)
		}
	}
}
