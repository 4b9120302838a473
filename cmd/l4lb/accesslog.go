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
	l, err := accesslog.Open(accesslog.Config{Format: c.Access, Path: c.AccessFile, Loops: loops, Logger: in.log,
		Interval: c.AccessInterval, OnConnect: c.AccessOnConnect})
	if err != nil {
		return fmt.Errorf("log.access_file: %w", err)
	}
	in.access = l
	in.server.SetAccessLog(l.Queue())
	dest := c.AccessFile
	if dest == "" {
		dest = "stderr"
	}
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
