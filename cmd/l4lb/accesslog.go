package main

import (
	"fmt"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/config"
)

// startAccessLog opens the access log c asks for and hands its queue to
// the server's loops; with access = "off" it does nothing, and the loops
// only ever check a nil pointer. The access log's settings are read at
// start: a reload keeps the running ones (and says so), an upgrade or a
// restart applies new ones.
func (in *instance) startAccessLog(c config.Log, loops int) error {
	if c.Access == config.AccessOff {
		return nil
	}
	ac := accesslog.Config{Format: c.Access, Path: c.AccessFile, Loops: loops, Logger: in.log,
		Interval: c.AccessInterval, OnConnect: c.AccessOnConnect}
	dest := c.AccessFile
	if dest == "" {
		dest = "stderr"
	}
	if c.Access == config.AccessSyslog {
		w, err := openSyslog(c, "access")
		if err != nil {
			return err
		}
		ac.Syslog, dest = w, c.Syslog
		if !w.Connected() {
			in.log.Warn("access log: no syslog daemon there yet: records are dropped (l4lb_syslog_dropped_total) until one listens", "syslog", c.Syslog)
		}
	}
	l, err := accesslog.Open(ac)
	if err != nil {
		if ac.Syslog != nil {
			ac.Syslog.Close()
		}
		return fmt.Errorf("log.access_file: %w", err)
	}
	in.access = l
	in.server.SetAccessLog(l.Queue())
	in.log.Info("access log on", "format", c.Access, "to", dest, "interval", c.AccessInterval, "on_connect", c.AccessOnConnect)
	return nil
}

// stopAccessLog detaches the access log from the loops, writes what they
// queued and closes it. Call it once the server has stopped, so the
// connections it cut are written too.
func (in *instance) stopAccessLog() {
	if in.access == nil {
		return
	}
	in.server.SetAccessLog(nil)
	if err := in.access.Close(); err != nil {
		in.log.Warn("access log: close failed", "error", err)
	}
	in.access = nil
}
