package accesslog

import (
	"time"

	"github.com/l4lb/l4lb/pkg/syslog"
)

// sendToSyslog returns the writer's way of taking a record when the
// records go to syslog: one message each, since a datagram is one message
// to a syslog daemon (where a file takes many lines per write). The body
// is the record's JSON, for the daemon to parse (rsyslog's mmjsonparse,
// syslog-ng's json-parser, journald's MESSAGE read by a shipper) rather
// than logfmt no syslog tool parses; it is stamped with the record's time,
// at info. A message the writer drops (socket full, daemon away) counts
// as a dropped record; the socket is never waited for.
func (l *Log) sendToSyslog() func(*Record) {
	buf := make([]byte, 0, maxLine)
	return func(r *Record) {
		buf = AppendJSON(buf[:0], r)
		if !l.sys.Send(syslog.SeverityInfo, time.Unix(0, r.End), buf) {
			l.q.AddDropped(1)
		}
	}
}
