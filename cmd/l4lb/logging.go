package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/syslog"
)

// newLogger returns the process logger [log] asks for and what closes it:
// lines on w (standard error), or with process = "syslog" one message a
// record to [log] syslog, its severity from the record's level. A syslog
// writer that cannot be made (the file passed check, so this is a bug or
// a host without the address family) leaves the log on w, with a warning.
func newLogger(c config.Log, w io.Writer) (*slog.Logger, func()) {
	var level slog.Level
	switch c.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	json := c.Format == "json"
	var err error
	if c.Process == config.ProcessSyslog {
		var sw *syslog.Writer
		if sw, err = openSyslog(c, "process"); err == nil {
			if !sw.Connected() {
				fmt.Fprintf(w, "l4lb: process log: no syslog daemon at %s yet: its messages are dropped (l4lb_syslog_dropped_total) until one listens\n", c.Syslog)
			}
			return slog.New(syslog.NewHandler(sw, json, level)), func() { sw.Close() }
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	log := slog.New(slog.NewTextHandler(w, opts))
	if json {
		log = slog.New(slog.NewJSONHandler(w, opts))
	}
	if err != nil {
		log.Warn("process log: syslog unusable, logging to standard error", "error", err)
	}
	return log, func() {}
}

// openSyslog opens a syslog writer to [log] syslog for one log, its
// messages' MSGID msgid.
func openSyslog(c config.Log, msgid string) (*syslog.Writer, error) {
	addr, err := syslog.ParseAddress(c.Syslog)
	if err != nil {
		return nil, fmt.Errorf("log.syslog: %w", err)
	}
	facility, err := syslog.ParseFacility(c.SyslogFacility)
	if err != nil {
		return nil, fmt.Errorf("log.syslog_facility: %w", err)
	}
	return syslog.Open(syslog.Config{Address: addr, Format: c.SyslogFormat, Facility: facility, MsgID: msgid})
}

// syslogOutputs are the logs this process sends to syslog, for their
// drops' metric.
func (in *instance) syslogOutputs() []admin.SyslogOutput {
	var outs []admin.SyslogOutput
	if in.access != nil && in.access.Syslog() != nil {
		outs = append(outs, admin.SyslogOutput{Log: "access", Writer: in.access.Syslog()})
	}
	if h, ok := in.log.Handler().(*syslog.Handler); ok {
		outs = append(outs, admin.SyslogOutput{Log: "process", Writer: h.Writer()})
	}
	return outs
}
