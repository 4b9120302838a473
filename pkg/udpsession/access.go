package udpsession

import (
	"time"

	"github.com/l4lb/l4lb/pkg/accesslog"
)

// A session's access records: one when it ends (event close: listener,
// client, backend, datagrams and bytes each way, duration, why it ended)
// and, with access_interval, interim ones while it is open, spread over
// the interval as the TCP relay's are (accesslog.Schedule). A session's
// datagrams to the client and their bytes are counted as its replies are
// read and queued for the client (as the listener's `responses` counts
// them): a reply the kernel then refuses is in the drops (client_send)
// and in these counts too. A listener with access_log = false
// (Settings.NoAccessLog) writes none of them (udpSock.queue).

// UseAccessLog makes the loop's sessions write to the access log found in
// sink (the TCP relay's of the same loop: relay.Shared.AccessSink).
// Before the loop starts.
func (l *Loop) UseAccessLog(sink *accesslog.Sink) { l.access = sink }

// queue is the access log's queue; nil while it is off.
func (l *Loop) queue() *accesslog.Queue { return l.access.For(true) }

// queue is the queue the records of u's sessions go to: nil while the
// access log is off, or u's listener keeps out of it (access_log = false).
func (u *udpSock) queue() *accesslog.Queue { return u.l.access.For(!u.f.Settings().NoAccessLog) }

// record takes an ended session off the schedule and, with the access log
// on, queues its close record.
func (s *session) record(why SessionEnd) {
	l := s.u.l
	l.interim.Remove(&s.interimAt)
	q := s.u.queue()
	if q == nil {
		return
	}
	var r accesslog.Record
	s.fill(&r, l.r.Now())
	r.Reason, r.Result = why.String(), resultOK
	if why == EndRefused && s.responses == 0 {
		r.Result = resultFailed // no backend took its first datagram: a dial that failed
	}
	q.Push(l.r.ID(), &r)
}

// The results a session's close record says, as a TCP client's would.
const (
	resultOK     = "ok"
	resultFailed = "failed"
)

// fill sets what every record of s says, its duration until now (the
// loop's clock).
func (s *session) fill(r *accesslog.Record, now int64) {
	u := s.u
	*r = accesslog.Record{
		End: time.Now().UnixNano(), Duration: time.Duration(now - s.born),
		Listener: u.f.Name, Pool: s.pool.Name, Client: s.client, Backend: s.backend.Addr,
		ToBackend: s.bytesToBackend, ToClient: s.bytesToClient, UDP: true,
		DatagramsToBackend: int64(s.requests), DatagramsToClient: int64(s.responses),
	}
}

// listInterim puts an open session on its loop's schedule of interim
// records when the access log asks for them.
func (s *session) listInterim() {
	l := s.u.l
	q := s.u.queue()
	if q == nil || q.Interval() == 0 {
		return
	}
	now := l.r.Now()
	l.interim.Add(&s.interimAt, s, now)
	if !l.interimTimer.Armed() {
		l.r.Arm(&l.interimTimer, now+q.Interval())
	}
}

// interimDue writes the interim records due now, a bounded share of the
// loop's sessions per look, and sets the next look.
func (l *Loop) interimDue(now int64) {
	q := l.queue()
	if q == nil || q.Interval() == 0 {
		l.interim.Clear()
		return
	}
	_, next := l.interim.Take(now, q.Interval(), func(s *session) {
		q := s.u.queue() // its listener may have left the log since
		if q == nil {
			return
		}
		var r accesslog.Record
		s.fill(&r, now)
		r.Event = accesslog.EventInterim
		q.Push(l.r.ID(), &r)
	})
	if next != 0 {
		l.r.Arm(&l.interimTimer, next)
	}
}
