// Package syslog sends log messages to a syslog daemon over a datagram
// socket, one message per datagram, without ever blocking the caller: the
// local socket (/dev/log, or another unixgram path) or a UDP collector
// (RFC 5426).
//
// # Formats
//
// Two header formats, chosen per output (Config.Format):
//
//   - rfc5424 (the default): RFC 5424's header, "<PRI>1 TIMESTAMP HOSTNAME
//     l4lb PID MSGID - MSG", the timestamp RFC 3339 in UTC with
//     microseconds. What a collector over UDP parses best (rsyslog's
//     imudp and syslog-ng's network() detect it; both keep the fraction
//     and the MSGID), and what the issue asked for.
//   - local: the header syslog(3) writes to /dev/log, "<PRI>Mmm dd
//     hh:mm:ss l4lb[PID]: MSG" (RFC 3164 without a hostname), for local
//     daemons that parse nothing else. systemd-journald, which owns
//     /dev/log on most hosts, takes only this form apart (its issue
//     systemd#19251, RFC 5424 on /dev/log, is open): given RFC 5424 it
//     keeps the priority but stores "1 2026-... host l4lb PID MSGID - "
//     as the start of MESSAGE and sets no SYSLOG_IDENTIFIER, so
//     `journalctl -t l4lb` finds nothing (`_COMM=l4lb` still does).
//     rsyslog's imuxsock with its default special parser
//     (SysSock.UseSpecialParser) does the same (rsyslog#4749). Neither
//     keeps this form's whole-second time, but the access record's JSON
//     carries its own, to the microsecond.
//
// The default stays RFC 5424 because it is the one format that means the
// same to every receiver; on a journald host, "local" reads better.
// Either way, PRI is facility*8 + severity, and the body follows the
// header unchanged (without a BOM: RFC 5424's MSG-ANY; the access log's
// JSON is ASCII but for server names).
//
// # Never blocking
//
// The socket is non-blocking, and every send is one sendto(2) with
// MSG_DONTWAIT: a daemon that does not read fills the socket's queue and
// the next send fails with EAGAIN at once. A message that cannot be sent
// is dropped and counted by reason (Reason): full (EAGAIN, ENOBUFS),
// unreachable (no socket at the path, or nobody reading it: the daemon
// stopped or restarted; or a UDP port answering ICMP unreachable), error
// (anything else). After an unreachable error the socket is closed and
// opened again at the next message, at most once per RetryEvery: a
// restarted daemon's new socket is found within a second, and a daemon
// that stays away costs one failed connect(2) a second, not one per
// message.
//
// # Size
//
// A message longer than the transport's bound is cut at a UTF-8 boundary
// and ends in TruncatedMarker, rather than dropped: 8 KiB on a unixgram
// socket (rsyslog's default maxMessageSize; journald and syslog-ng take
// more), 4 KiB over UDP: twice the 2,048 bytes every receiver SHOULD
// accept (RFC 5424 §6.1, RFC 5426 §3.2), which rsyslog's and syslog-ng's
// 8 KiB defaults take, so that the longest access record (2,560 bytes, an
// SNI name of escaped bytes included) and its header are never cut into
// JSON no parser reads. A usual record of 300 bytes or so fits a
// 1500-byte path unfragmented.
package syslog
