package config

import "github.com/l4lb/l4lb/pkg/syslog"

// decodeSyslog reads [log]'s syslog keys: the process log's output, the
// address (pkg/syslog's grammar, checked here so check reports it), the
// header format and the facility.
func decodeSyslog(t *table, l *Log) {
	t.oneOf("process", &l.Process, "process log output")
	t.oneOf("syslog_format", &l.SyslogFormat, "syslog format")
	t.oneOf("syslog_facility", &l.SyslogFacility, "syslog facility")
	if t.str("syslog", &l.Syslog) {
		a, err := syslog.ParseAddress(l.Syslog)
		if err != nil {
			t.c.add(t.keyOf("syslog"), "%v", err)
		} else if a.Network == syslog.NetworkUDP && l.SyslogFormat == syslog.FormatLocal {
			t.c.add(t.keyOf(t.writtenOr("syslog_format", "syslog")), `syslog_format = "local" is for a local unixgram socket; %q is UDP: use "rfc5424"`, l.Syslog)
		}
	}
	if l.Access == AccessSyslog && l.AccessFile != "" {
		t.c.add(t.keyOf("access_file"), `set with access = "syslog", which sends the records to [log] syslog, not to a file: remove one`)
	}
}
