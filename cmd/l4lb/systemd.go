package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxy"
	"github.com/l4lb/l4lb/pkg/sdnotify"
)

// statusCheck is how often the STATUS= line is worked out; it is sent
// when it changed (systemd keeps the last one), so at most once a
// statusCheck under load and never while nothing changes. Working it out
// reads a few atomics per backend.
const statusCheck = time.Second

// systemdNotifier tells systemd, while l4lb serves, what READY=1 and
// STOPPING=1 do not: STATUS= lines (connections, UDP sessions, usable
// backends per pool) and, when WatchdogSec= is set, WATCHDOG=1 pings sent
// only after every event loop ran a task posted to it (Server.Heartbeat):
// a wedged loop stops the pings and systemd restarts l4lb. Without
// NOTIFY_SOCKET it starts nothing. Reloads announce themselves
// (sdnotify.Reloading, then Ready); the status shows the new pools at its
// next look.
type systemdNotifier struct {
	server *proxy.Server
	pools  func() []*pool.Pool // the pools serving now (a reload replaces them)
	log    *slog.Logger
	phase  atomic.Pointer[string] // "" serving, or "draining"
	kick   chan struct{}          // send the status now
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// startSystemdNotifier starts the status and watchdog goroutines for a
// running server; pools returns the pools serving now, and must be safe
// to call from another goroutine while a reload replaces them.
func startSystemdNotifier(server *proxy.Server, pools func() []*pool.Pool, log *slog.Logger) *systemdNotifier {
	n := &systemdNotifier{server: server, pools: pools, log: log, kick: make(chan struct{}, 1)}
	n.setPhase("")
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if !sdnotify.Enabled() {
		return n
	}
	n.done.Go(func() { n.runStatus(ctx) })
	switch interval, err := sdnotify.WatchdogInterval(); {
	case err != nil:
		log.Warn("systemd watchdog off: cannot read its period", "error", err)
	case interval > 0:
		log.Info("systemd watchdog on: pings only while every event loop turns", "interval", interval.String())
		n.done.Go(func() { n.runWatchdog(ctx, interval) })
	}
	return n
}

// stop ends both goroutines. Call it after the drain: the loops turn
// while they drain, and the pings go on.
func (n *systemdNotifier) stop() {
	n.cancel()
	n.done.Wait()
}

// draining says in the status, from now on, that l4lb drains (the caller
// sends STOPPING=1).
func (n *systemdNotifier) draining() { n.setPhase("draining"); n.sendNow() }

func (n *systemdNotifier) setPhase(p string) { n.phase.Store(&p) }

func (n *systemdNotifier) sendNow() {
	select {
	case n.kick <- struct{}{}:
	default: // one is already pending
	}
}

func (n *systemdNotifier) runStatus(ctx context.Context) {
	t := time.NewTicker(statusCheck)
	defer t.Stop()
	last := ""
	for {
		if line := n.status(); line != last {
			if err := sdnotify.Status(line); err != nil {
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
func (n *systemdNotifier) status() string {
	var b strings.Builder
	if p := *n.phase.Load(); p != "" {
		b.WriteString(p + ": ")
	}
	b.WriteString(plural(n.server.Active(), "connection"))
	if len(n.server.UDPFronts()) > 0 {
		b.WriteString(", " + plural(n.server.Sessions(), "udp session"))
	}
	for i, p := range n.pools() {
		if i == 0 {
			b.WriteString("; pools: ")
		} else {
			b.WriteString(", ")
		}
		usable := 0
		for _, be := range p.Backends() {
			if be.InRotation() {
				usable++
			}
		}
		fmt.Fprintf(&b, "%s %d/%d", p.Name, usable, len(p.Backends()))
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
func (n *systemdNotifier) runWatchdog(ctx context.Context, interval time.Duration) {
	stuck, failed := false, false // failed: the last heartbeat did not succeed
	alive := func(ctx context.Context) error {
		err := n.server.Heartbeat(ctx)
		failed = err != nil
		if !failed && stuck {
			stuck = false
			n.log.Info("event loops turning again: systemd watchdog pings resumed")
		}
		return err
	}
	sdnotify.RunWatchdog(ctx, interval, alive, func(err error) {
		if !failed {
			n.log.Warn("cannot ping the systemd watchdog", "error", err)
			return
		}
		stuck = true
		n.log.Error("systemd watchdog ping withheld: the data path is not turning; systemd restarts l4lb if this lasts",
			"error", err, "interval", interval.String())
	})
}
