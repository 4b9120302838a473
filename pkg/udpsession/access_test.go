package udpsession

import (
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/listener"
)

// accessRig is a rig whose loop writes to an access log queue the test
// drains (its one consumer).
func accessRig(t *testing.T, backends []string, interval time.Duration, o udpRigOpts) (*udpRig, *accesslog.Queue) {
	t.Helper()
	q := accesslog.NewQueue(1, 1024)
	q.SetEvents(interval, false)
	o.access = &accesslog.Sink{}
	o.access.Set(q)
	return newUDPRig(t, backends, o), q
}

// drainUntil collects q's records until done says so.
func drainUntil(t *testing.T, q *accesslog.Queue, got *[]accesslog.Record, what string, done func() bool) {
	t.Helper()
	testnet.Eventually(t, what, func() bool {
		q.Drain(func(r *accesslog.Record) { *got = append(*got, *r) })
		return done()
	})
}

// A session's interim records while it is open (its counts so far, an
// interval apart at least), then its close record when it times out:
// listener, client, backend, datagrams and bytes each way, how long it
// lasted, why it ended.
func TestUDPSessionRecords(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	const timeout = time.Second
	interval := 200 * time.Millisecond // below [log]'s floor: the queue takes any
	r, q := accessRig(t, []string{be.Addr}, interval, udpRigOpts{
		settings: func(s *Settings) { s.SessionTimeout = timeout }})
	c := r.client()
	for _, p := range []string{"a", "bb", "ccc"} {
		if reply, err := replyWithin(c, []byte(p), 20*time.Second); err != nil || string(reply) != p {
			t.Fatalf("reply %q, %v; want %q", reply, err, p)
		}
	}
	var got []accesslog.Record
	drainUntil(t, q, &got, "the session's close record", func() bool {
		return len(got) > 0 && got[len(got)-1].Event == accesslog.EventClose
	})
	end := got[len(got)-1]
	want := accesslog.Record{End: end.End, Duration: end.Duration, Listener: "u", Pool: "u",
		Client: c.LocalAddr().(*net.UDPAddr).AddrPort(), Backend: be.Addr,
		ToBackend: 6, ToClient: 6, Reason: EndTimeout.String(), Result: "ok",
		UDP: true, DatagramsToBackend: 3, DatagramsToClient: 3}
	if end != want {
		t.Fatalf("close record %+v, want %+v", end, want)
	}
	if end.Duration < timeout {
		t.Errorf("the session lasted %v, less than its timeout %v", end.Duration, timeout)
	}
	interims := got[:len(got)-1]
	if len(interims) < 2 {
		t.Fatalf("%d interim records in a session of %v at %v", len(interims), end.Duration, interval)
	}
	for i, ir := range interims {
		if ir.Event != accesslog.EventInterim || !ir.UDP || ir.Reason != "" || ir.Client != want.Client || ir.Backend != be.Addr {
			t.Fatalf("record %+v before the close is no interim record of the session", ir)
		}
		if ir.ToBackend > 6 || ir.DatagramsToClient > 3 || ir.Duration > end.Duration {
			t.Fatalf("interim record %+v counts more than the session did", ir)
		}
		if i > 0 && ir.Duration-interims[i-1].Duration < interval {
			t.Fatalf("interim records %v apart, want at least %v", ir.Duration-interims[i-1].Duration, interval)
		}
	}
	if last := interims[len(interims)-1]; last.ToBackend != 6 || last.DatagramsToBackend != 3 || last.ToClient != 6 {
		t.Fatalf("the last interim record %+v, want the session's counts", last)
	}
	r.on(r.loops[0], func() {
		if n := r.loops[0].interim.Len(); n != 0 {
			t.Errorf("%d sessions still listed for interim records after the only one ended", n)
		}
	})
}

// A session whose only backend refused its first datagram ended as a
// dial that failed.
func TestUDPRefusedSessionRecord(t *testing.T) {
	r, q := accessRig(t, []string{refusingAddr(t)}, 0, udpRigOpts{})
	c := r.client()
	var got []accesslog.Record
	drainUntil(t, q, &got, "the refused session's record", func() bool {
		c.Write([]byte("q")) // until a session has been refused
		return len(got) > 0
	})
	if r := got[0]; r.Reason != EndRefused.String() || r.Result != "failed" || r.DatagramsToClient != 0 || !r.UDP {
		t.Fatalf("record %+v, want a refused session, failed", r)
	}
}

// A session handed over in an upgrade writes nothing in the old process;
// the new one's close record covers the whole session: its age and both
// processes' datagrams and bytes (as a TCP connection's does).
func TestUDPHandedOverSessionRecord(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	backends := []string{be.Addr}
	old, oldQ := accessRig(t, backends, time.Hour, udpRigOpts{})
	c := old.client()
	echoes(t, c, "one")
	nw, newQ := accessRig(t, backends, time.Hour, udpRigOpts{sameSockets: old})
	for _, l := range old.loops {
		l.UnwatchListeners()
		old.on(l, func() {})
	}
	b := detach(t, old)
	if age := b.Sessions[0].Age; age <= 0 || b.Sessions[0].BytesToBackend != 3 || b.Sessions[0].BytesToClient != 3 {
		t.Fatalf("hand-over record %+v: want its age and 3 bytes each way", b.Sessions[0])
	}
	goAll(nw, adopt(t, nw, transit(t, b)))
	echoes(t, c, "twotwo")
	r := nw.loops[0]
	nw.on(r, func() {
		if r.interim.Len() != 1 {
			t.Errorf("the adopted session is not listed for interim records")
		}
		for _, u := range r.udps {
			for s := u.idle.head; s != nil; s = u.idle.head {
				s.end(EndShutdown)
			}
		}
	})
	var got []accesslog.Record
	drainUntil(t, newQ, &got, "the new process's close record", func() bool { return len(got) == 1 })
	if rec := got[0]; rec.Reason != EndShutdown.String() || rec.DatagramsToBackend != 2 || rec.DatagramsToClient != 2 ||
		rec.ToBackend != 9 || rec.ToClient != 9 || rec.Duration < time.Duration(b.Sessions[0].Age) {
		t.Fatalf("close record %+v: want both datagrams each way, 9 bytes, at least its age at the move %v", rec, time.Duration(b.Sessions[0].Age))
	}
	if n := oldQ.Drain(func(r *accesslog.Record) { t.Errorf("the old process wrote %+v", *r) }); n != 0 {
		t.Fatalf("the old process wrote %d records of a session it handed over", n)
	}
}

// A UDP listener with access_log = false (Settings.NoAccessLog) writes no
// line, interim or close, while another listener on the same loop writes
// both; its sessions are counted as before.
func TestUDPListenerOutOfTheAccessLogWritesNoLine(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	r, q := accessRig(t, []string{be.Addr}, 20*time.Millisecond, udpRigOpts{
		settings: func(s *Settings) { s.SessionTimeout = time.Second }})
	set := *r.front.Settings()
	set.NoAccessLog = true
	quiet := NewFront("quiet", set)
	socks, err := listener.BindUDP("quiet", "127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	l := r.loops[0]
	r.on(l, func() { err = l.AddListener(socks.FDs[0], quiet, socks.Addr.AddrPort(), socks.Wildcard) })
	if err != nil {
		socks.Close()
		t.Fatal(err)
	}
	quiet.Publish()
	qc, err := net.DialUDP("udp", nil, socks.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	for _, c := range []*net.UDPConn{qc, r.client()} { // quiet first: its interim records would be due first
		if reply, err := replyWithin(c, []byte("q"), 20*time.Second); err != nil || string(reply) != "q" {
			t.Fatalf("reply %q, %v", reply, err)
		}
	}
	events := map[string]map[accesslog.Event]int{"quiet": {}, "u": {}}
	var got []accesslog.Record
	drainUntil(t, q, &got, "the loud listener's interim and close records", func() bool {
		for _, rec := range got {
			events[rec.Listener][rec.Event]++
		}
		got = got[:0]
		return events["u"][accesslog.EventInterim] > 0 && events["u"][accesslog.EventClose] == 1
	})
	testnet.Eventually(t, "the quiet listener's session to time out", func() bool { return quiet.Ended[EndTimeout].Load() == 1 })
	r.on(l, func() {}) // a record pushed in the turn that ended it is queued by now
	q.Drain(func(rec *accesslog.Record) { events[rec.Listener][rec.Event]++ })
	if len(events["quiet"]) != 0 {
		t.Errorf("the listener with access_log = false wrote records: %v", events["quiet"])
	}
}
