package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/l4lb/l4lb/pkg/syslog"
)

// SyslogOutput is a log that goes to syslog ([log] access or process =
// "syslog"), for its drops.
type SyslogOutput struct {
	Log    string // "access" or "process"
	Writer *syslog.Writer
}

var descSyslogDropped = desc("l4lb_syslog_dropped_total",
	"Syslog messages dropped rather than waited for, by log (access, process) and reason: full (the socket's queue: the daemon reads too slowly), "+
		"unreachable (no daemon at [log] syslog, or between reconnects, at most one a second), error. Only for the logs set to syslog; "+
		"the access log's are in l4lb_access_log_dropped_total too.",
	"log", "reason")

// collectSyslog sends every syslog output's drops, every reason of each.
func collectSyslog(ch chan<- prometheus.Metric, outs []SyslogOutput) {
	for _, o := range outs {
		d := o.Writer.Dropped()
		for r := range syslog.NumReasons {
			ch <- prometheus.MustNewConstMetric(descSyslogDropped, prometheus.CounterValue, float64(d[r]), o.Log, r.String())
		}
	}
}
