package config

import (
	"testing"

	"github.com/l4lb/l4lb/pkg/syslog"
)

func TestSyslogKeys(t *testing.T) {
	l := mustParse(t, validBase).Log
	if l.Process != "stderr" || l.Syslog != "/dev/log" || l.SyslogFormat != "rfc5424" || l.SyslogFacility != "daemon" || l.UsesSyslog() {
		t.Fatalf("defaults: %+v", l)
	}
	l = mustParse(t, validBase+`[log]
access = "syslog"
process = "syslog"
syslog = "udp:[::1]:514"
syslog_facility = "local3"
`).Log
	if l.Access != "syslog" || l.Process != "syslog" || l.Syslog != "udp:[::1]:514" || l.SyslogFacility != "local3" || !l.UsesSyslog() {
		t.Fatalf("decoded %+v", l)
	}
	for _, addr := range []string{"/dev/log", "unixgram:/run/rsyslog/l4lb.sock", "udp:127.0.0.1:514"} {
		if got := mustParse(t, validBase+"[log]\nsyslog = \""+addr+"\"\n").Log.Syslog; got != addr {
			t.Errorf("%s: %q", addr, got)
		}
	}
	if f := mustParse(t, validBase+"[log]\nsyslog_format = \"local\"\n").Log.SyslogFormat; f != syslog.FormatLocal {
		t.Errorf("syslog_format local: %q", f)
	}
	for _, p := range []problem{
		{"a host name", validBase + "[log]\nsyslog = \"udp:loghost:514\" #!\n", "log.syslog",
			`"udp:loghost:514": udp:IP:PORT takes an IP address`},
		{"no scheme", validBase + "[log]\nsyslog = \"127.0.0.1:514\" #!\n", "log.syslog",
			"use a socket path (/dev/log), unixgram:/path or udp:IP:PORT"},
		{"relative path", validBase + "[log]\nsyslog = \"unixgram:dev/log\" #!\n", "log.syslog", "must be absolute"},
		{"tcp", validBase + "[log]\nsyslog = \"tcp:127.0.0.1:514\" #!\n", "log.syslog", "udp:IP:PORT"},
		{"local over udp", validBase + "[log]\nsyslog = \"udp:127.0.0.1:514\"\nsyslog_format = \"local\" #!\n", "log.syslog_format",
			`syslog_format = "local" is for a local unixgram socket`},
		{"unknown format", validBase + "[log]\nsyslog_format = \"rfc3164\" #!\n", "log.syslog_format",
			`"rfc3164" is not a syslog format; use one of: rfc5424, local`},
		{"unknown facility", validBase + "[log]\nsyslog_facility = \"local8\" #!\n", "log.syslog_facility", "not a syslog facility"},
		{"unknown process output", validBase + "[log]\nprocess = \"journal\" #!\n", "log.process",
			`"journal" is not a process log output; use one of: stderr, syslog`},
		{"a file with syslog", validBase + "[log]\naccess = \"syslog\"\naccess_file = \"/var/log/a.log\" #!\n", "log.access_file",
			`set with access = "syslog"`},
	} {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, parseErrors(t, p.src)) })
	}
}
