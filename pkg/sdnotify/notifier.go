package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// statusCheck is how often the STATUS= line is worked out; it is sent
// when it changed (systemd keeps the last one), so at most once a
// statusCheck under load and never while nothing changes. Working it out
// reads a few atomics per backend.
const statusCheck = time.Second

// Notifier tells systemd, while l4lb serves, what READY=1 and STOPPING=1
// do not: STATUS= lines (connections, UDP sessions, usable backends per
// pool) and, when WatchdogSec= is set, WATCHDOG=1 pings sent only after
// the service's liveness check passed (l4lb's: every event loop ran a
// task posted to it): a wedged loop stops the pings and systemd restarts
// l4lb. Without NOTIFY_SOCKET it starts nothing. Reloads announce
// themselves (Reloading, then Ready); the status shows the new pools at
// its next look.
type Notifier struct {
	service Service
	log     *slog.Logger
	phase   atomic.Pointer[string] // "" serving, or "draining"
	kick    chan struct{}          // send the status now
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

// Service is what the Notifier reports on; its methods are called from
// the Notifier's goroutines, while the service serves and reloads.
type Service interface {
	// Counts is what the STATUS= line says now.
	Counts() Counts
	// Heartbeat returns once the service's data path turned, or ctx's
	// error.
	Heartbeat(ctx context.Context) error
}

// Counts is what the STATUS= line says.
type Counts struct {
	Connections int64
	Sessions    int64 // UDP sessions; shown only when UDP is set
	UDP         bool
	Pools       []PoolCounts
}

// PoolCounts is a pool's usable backends of all.
type PoolCounts struct {
	Name          string
	Usable, Total int
}

// StartNotifier starts the status and watchdog goroutines for a running
// service.
func StartNotifier(service Service, log *slog.Logger) *Notifier {
	n := &Notifier{service: service, log: log, kick: make(chan struct{}, 1)}
	n.setPhase("")
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if !Enabled() {
		return n
	}
	n.done.Go(func() { n.runStatus(ctx) })
	switch interval, err := WatchdogInterval(); {
	case err != nil:
		log.Warn("systemd watchdog off: cannot read its period", "error", err)
	case interval > 0:
		log.Info("systemd watchdog on: pings only while every event loop turns", "interval", interval.String())
		n.done.Go(func() { n.runWatchdog(ctx, interval) })
	}
	return n
}

// Stop ends both goroutines. Call it after the drain: the loops turn
// while they drain, and the pings go on.
func (n *Notifier) Stop() {
	n.cancel()
	n.done.Wait()
}

// Draining says in the status, from now on, that l4lb drains (the caller
// sends STOPPING=1).
func (n *Notifier) Draining() { n.setPhase("draining"); n.sendNow() }

func (n *Notifier) setPhase(p string) { n.phase.Store(&p) }

func (n *Notifier) sendNow() {
	select {
	case n.kick <- struct{}{}:
	default: // one is already pending
	}
}

func (n *Notifier) runStatus(ctx context.Context) {
	t := time.NewTicker(statusCheck)
	defer t.Stop()
	last := ""
	for {
		if line := n.status(); line != last {
			if err := Status(line); err != nil {
				n.log.Debug("cannot send systemd status", "error", err)
			}
			last = line
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
	}
}

// status renders the STATUS= line: "412 connections, 3 udp sessions;
// pools: web 3/3, dns 2/3" (usable of all backends), prefixed with
// "draining: " during the drain. UDP sessions only with UDP listeners.
func (n *Notifier) status() string {
	var b strings.Builder
	if p := *n.phase.Load(); p != "" {
		b.WriteString(p + ": ")
	}
	c := n.service.Counts()
	b.WriteString(plural(c.Connections, "connection"))
	if c.UDP {
		b.WriteString(", " + plural(c.Sessions, "udp session"))
	}
	for i, p := range c.Pools {
		if i == 0 {
			b.WriteString("; pools: ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d/%d", p.Name, p.Usable, p.Total)
	}
	return b.String()
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatInt(n, 10) + " " + what + "s"
}

// runWatchdog pings every interval after a heartbeat of every loop
// succeeded within it, and logs when loops stop and start turning again.
func (n *Notifier) runWatchdog(ctx context.Context, interval time.Duration) {
	stuck, failed := false, false // failed: the last heartbeat did not succeed
	alive := func(ctx context.Context) error {
		err := n.service.Heartbeat(ctx)
		failed = err != nil
		if !failed && stuck {
			stuck = false
			n.log.Info("event loops turning again: systemd watchdog pings resumed")
		}
		return err
	}
	RunWatchdog(ctx, interval, alive, func(err error) {
		if !failed {
			n.log.Warn("cannot ping the systemd watchdog", "error", err)
			return
		}
		stuck = true
		n.log.Error("systemd watchdog ping withheld: the data path is not turning; systemd restarts l4lb if this lasts",
			"error", err, "interval", interval.String())
	})
}
