package relay

import (
	"net/netip"
	"time"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/splice"
)

// CloseReason says how a TCP client connection ended. Every client a loop
// accepts ends with exactly one: counted per listener (Front.Closed) and,
// with the access log on, written as one line.
type CloseReason uint8

const (
	// Relayed connections (the client was connected to a backend).

	// CloseCompleted: both directions ended with a FIN.
	CloseCompleted CloseReason = iota
	// CloseClientReset: the client's socket failed (a reset, or another
	// socket error); the backend was reset in turn.
	CloseClientReset
	// CloseBackendReset: the backend's socket failed, its handshake's
	// reset included; the client was reset in turn.
	CloseBackendReset
	// CloseIdleTimeout: nothing moved for the pool's idle_timeout; both
	// sides were reset.
	CloseIdleTimeout
	// CloseShutdown: cut with a reset on both sides when a drain ran out
	// of time (shutdown_timeout, a second signal) or the loops stopped;
	// a client still being dialed for is cut too (result rejected).
	CloseShutdown
	// CloseDrained: cut with a reset on both sides when an operator's
	// drain of its backend reached its deadline.
	CloseDrained

	// Refused clients (never connected to a backend).

	// CloseConnectionCap: max_connections clients were open; closed at
	// once.
	CloseConnectionCap
	// CloseNoBackend: every allowed dial failed, or no backend could be
	// tried (result failed).
	CloseNoBackend
	// CloseLocalError: this host's trouble (out of fds, ports, memory)
	// kept the client from being served; no backend is blamed.
	CloseLocalError
	// CloseLoop: the client was one of l4lb's own backend connections (a
	// backend leading back to a listener); reset.
	CloseLoop
	// CloseClientLeft: the client reset (or closed both ways) while its
	// backend was being dialed (or its PROXY header awaited, or a slot
	// queued for); the dial was called off.
	CloseClientLeft
	// CloseDenied: the client's address is in the listener's deny list,
	// or not in its allow list.
	CloseDenied
	// CloseSourceConnections: the client's address had
	// max_connections_per_source connections open.
	CloseSourceConnections
	// CloseSourceRate: the client's address went past rate_per_source.
	CloseSourceRate
	// CloseBackendCap: every usable backend was at its max_connections
	// (and stayed so for queue_timeout).
	CloseBackendCap
	// CloseProxyUntrusted: a peer outside trusted_proxies on a listener
	// that accepts PROXY headers; reset before reading a byte.
	CloseProxyUntrusted
	// CloseProxyHeader: the PROXY header was malformed (or the peer
	// closed before sending one); nothing was forwarded.
	CloseProxyHeader
	// CloseProxyTimeout: no complete PROXY header within proxy_timeout.
	CloseProxyTimeout
	// CloseUnrecognized: a listener with SNI routes and on_unrecognized =
	// "reset" met first bytes that are no ClientHello; reset.
	CloseUnrecognized

	NumCloseReasons
)

var closeReasonNames = [NumCloseReasons]string{
	"completed", "client_reset", "backend_reset", "idle_timeout", "shutdown", "drained",
	"connection_cap", "no_backend", "local_error", "loop", "client_left",
	"denied", "source_connections", "source_rate", "backend_cap",
	"proxy_untrusted", "proxy_header", "proxy_timeout", "unrecognized",
}

func (r CloseReason) String() string {
	if r < NumCloseReasons {
		return closeReasonNames[r]
	}
	return "unknown"
}

// outcome is the relay outcome a reason stands for (the breaker's early
// reset verdict and the debug log read it).
func (r CloseReason) outcome() splice.Outcome {
	switch r {
	case CloseCompleted:
		return splice.Completed
	case CloseClientReset:
		return splice.ClientReset
	case CloseBackendReset:
		return splice.BackendReset
	case CloseIdleTimeout:
		return splice.IdleTimeout
	}
	return splice.Aborted
}

// ClientResult is a client connection's result as
// l4lb_client_connections_total counts it.
type ClientResult uint8

const (
	ResultOK       ClientResult = iota // connected to a backend
	ResultFailed                       // no backend could be dialed
	ResultRejected                     // the cap, local trouble, a loop, a client that left, a cut dial
	NumClientResults
)

var clientResultNames = [NumClientResults]string{"ok", "failed", "rejected"}

func (r ClientResult) String() string {
	if r < NumClientResults {
		return clientResultNames[r]
	}
	return "unknown"
}

// SetAccessLog makes the loops hand every ended client connection to q;
// nil turns the access log off (the loops then only check the pointer).
// Safe while the loops run.
func (s *Shared) SetAccessLog(q *accesslog.Queue) { s.access.Set(q) }

// AccessLog is the queue the loops hand records to; nil when off.
func (s *Shared) AccessLog() *accesslog.Queue { return s.access.Load() }

// AccessSink is where the loops find the access log, for the UDP sessions
// of the same loops to write to as well.
func (s *Shared) AccessSink() *accesslog.Sink { return &s.access }

// accessFor is the queue the records of f's clients go to: nil while the
// access log is off, or f keeps out of it.
func (l *Loop) accessFor(f *Front) *accesslog.Queue { return l.sh.access.For(!f.noAccessLog.Load()) }

// record counts a client connection that ended on this loop and, with the
// access log on, queues its record.
func (c *conn) record(why CloseReason, relayed bool) {
	f := c.f
	f.Closed[why].Add(1)
	q := c.l.accessFor(f)
	if q == nil {
		return
	}
	var r accesslog.Record
	c.fill(&r, c.l.r.Now())
	r.Reason, r.Result = why.String(), ResultRejected.String()
	switch {
	case relayed && (why != CloseLocalError || c.served):
		// A connection that reached relaying and then met this host's
		// trouble before it was served (its PROXY header not sent) is
		// rejected, as l4lb_client_connections_total counts it; one
		// served first (counted ok) keeps its backend and bytes.
		r.Result, r.Backend = ResultOK.String(), c.backend.Addr
		r.ToBackend, r.ToClient = c.streams[0].Delivered, c.streams[1].Delivered
	case why == CloseNoBackend:
		r.Result = ResultFailed.String()
	}
	q.Push(c.l.r.ID(), &r)
}

// fill sets what every record of c says: who, where, and for how long
// until now (the loop's clock).
func (c *conn) fill(r *accesslog.Record, now int64) {
	*r = accesslog.Record{
		End: time.Now().UnixNano(), Duration: time.Duration(now - c.born),
		Listener: c.f.Name, Pool: c.pool.Name, Client: c.src,
	}
	r.Routed = c.sni != nil || c.f.Routing() != nil
	if c.sni != nil {
		r.ServerName = c.sni.serverName
		if c.sni.route != nil {
			r.Route = c.sni.route.Name
		}
	}
}

// recordOpen queues a record of a relaying connection still open: its
// backend, the bytes so far, no reason or result yet.
func (c *conn) recordOpen(q *accesslog.Queue, ev accesslog.Event, now int64) {
	var r accesslog.Record
	c.fill(&r, now)
	r.Event, r.Backend = ev, c.backend.Addr
	r.ToBackend, r.ToClient = c.streams[0].Delivered, c.streams[1].Delivered
	q.Push(c.l.r.ID(), &r)
}

// opened counts a client served (ok) and marks it so, and writes, with
// the access log on, the connect record of a client whose backend
// connection was just established (access_on_connect), and lists it for
// interim records (access_interval).
func (c *conn) opened() {
	c.f.OK.Add(1)
	c.served = true
	q := c.l.accessFor(c.f)
	if q == nil {
		return
	}
	if q.OnConnect() {
		c.recordOpen(q, accesslog.EventConnect, c.l.r.Now())
	}
	c.listInterim(q)
}

// listInterim puts a relaying connection on its loop's schedule of
// interim records when q asks for them: its first is due an interval
// from now.
func (c *conn) listInterim(q *accesslog.Queue) {
	iv := q.Interval()
	if iv == 0 {
		return
	}
	l := c.l
	now := l.r.Now()
	l.interim.Add(&c.interimAt, c, now)
	if !l.interimTimer.Armed() {
		l.r.Arm(&l.interimTimer, now+iv)
	}
}

// interimDue writes the interim records due now, a bounded share of the
// loop's connections per look (accesslog.Schedule), and sets the next look.
func (l *Loop) interimDue(now int64) {
	q := l.sh.access.Load()
	if q == nil || q.Interval() == 0 {
		l.interim.Clear() // the access log went off: nothing more is due
		return
	}
	_, next := l.interim.Take(now, q.Interval(), func(c *conn) {
		if q := l.accessFor(c.f); q != nil { // its listener may have left the log since
			c.recordOpen(q, accesslog.EventInterim, now)
		}
	})
	if next != 0 {
		l.r.Arm(&l.interimTimer, next)
	}
}

// refusedAtAccept counts (and logs) a client closed before it became a
// connection of the loop: at the cap, or one whose socket it cannot watch.
func (l *Loop) refusedAtAccept(f *Front, src netip.AddrPort, why CloseReason) {
	f.Closed[why].Add(1)
	q := l.accessFor(f)
	if q == nil {
		return
	}
	r := accesslog.Record{End: time.Now().UnixNano(), Listener: f.Name, Client: src, Reason: why.String(), Result: ResultRejected.String(),
		Routed: f.Routing() != nil}
	if p := f.Pool(); p != nil {
		r.Pool = p.Name
	}
	q.Push(l.r.ID(), &r)
}
