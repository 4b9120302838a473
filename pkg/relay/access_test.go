package relay

import (
	"net/netip"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// recordConn is a relayed connection as close hands it to record, on a
// loop that never runs (its clock stands at 0; the connection was
// accepted 2ms before).
func recordConn(t *testing.T, sh *Shared) *conn {
	r, err := reactor.New(reactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Discard)
	l := &Loop{r: r, sh: sh}
	f := NewFront("web", &pool.Pool{Name: "web"})
	c := &conn{l: l, f: f, pool: f.Pool(), src: netip.MustParseAddrPort("192.0.2.7:51234"), born: -int64(2 * time.Millisecond)}
	c.backend = &pool.Backend{Addr: "10.0.0.1:80"}
	c.streams[0].Delivered, c.streams[1].Delivered = 64, 1024
	return c
}

// An ended connection costs no allocation, with the access log off or on:
// the record goes into the ring by value.
func TestRecordAllocatesNothing(t *testing.T) {
	sh := NewShared(10, nil, nil)
	c := recordConn(t, sh)
	if n := testing.AllocsPerRun(1000, func() { c.record(CloseCompleted, true) }); n != 0 {
		t.Errorf("access log off: %v allocations per ended connection, want 0", n)
	}
	q := accesslog.NewQueue(1, 64)
	sh.SetAccessLog(q)
	if n := testing.AllocsPerRun(1000, func() {
		c.record(CloseCompleted, true)
		q.Drain(func(*accesslog.Record) {})
	}); n != 0 {
		t.Errorf("access log on: %v allocations per ended connection, want 0", n)
	}
	if got := c.f.Closed[CloseCompleted].Load(); got != 2002 {
		t.Errorf("%d counted as completed, want 2002 (1001 runs each, log off and on)", got)
	}
}

// record fills every field from the connection.
func TestRecordFields(t *testing.T) {
	sh := NewShared(10, nil, nil)
	q := accesslog.NewQueue(1, 16)
	sh.SetAccessLog(q)
	c := recordConn(t, sh)
	before := time.Now().UnixNano()
	c.record(CloseBackendReset, true)
	c.record(CloseNoBackend, false)
	c.l.refusedAtAccept(c.f, c.src, CloseConnectionCap)
	var got []accesslog.Record
	q.Drain(func(r *accesslog.Record) { got = append(got, *r) })
	if len(got) != 3 {
		t.Fatalf("%d records, want 3", len(got))
	}
	for _, r := range got {
		if r.End < before || r.End > time.Now().UnixNano() {
			t.Errorf("record end %d outside the test", r.End)
		}
	}
	want := []accesslog.Record{
		{Duration: 2 * time.Millisecond, Listener: "web", Pool: "web", Client: c.src, Backend: "10.0.0.1:80",
			ToBackend: 64, ToClient: 1024, Reason: CloseBackendReset.String(), Result: ResultOK.String()},
		{Duration: 2 * time.Millisecond, Listener: "web", Pool: "web", Client: c.src, Reason: CloseNoBackend.String(), Result: ResultFailed.String()},
		{Listener: "web", Pool: "web", Client: c.src, Reason: CloseConnectionCap.String(), Result: ResultRejected.String()},
	}
	for i := range want {
		got[i].End = 0
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// What the access log adds to a connection's life on its loop, from the
// backend connection established (opened) to its close record and
// unlisting: with the log off, on, and on with access_on_connect and
// access_interval (the connect record, and listing for interim records).
//
//	go test -run - -bench ConnRecords ./pkg/relay
func BenchmarkConnRecords(b *testing.B) {
	for _, tc := range []struct {
		name     string
		on       bool
		interval time.Duration
	}{{"off", false, 0}, {"close", true, 0}, {"connect+interim", true, time.Second}} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := reactor.New(reactor.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(r.Discard)
			sh := NewShared(10, nil, nil)
			l := New(r, sh)
			q := accesslog.NewQueue(1, 1024)
			q.SetEvents(tc.interval, tc.interval > 0)
			if tc.on {
				sh.SetAccessLog(q)
			}
			f := NewFront("web", &pool.Pool{Name: "web"})
			c := &conn{l: l, f: f, pool: f.Pool(), src: netip.MustParseAddrPort("192.0.2.7:51234"), backend: &pool.Backend{Addr: "10.0.0.1:80"}}
			b.ReportAllocs()
			for i := range b.N {
				c.opened()
				c.record(CloseCompleted, true)
				l.interim.Remove(&c.interimAt)
				if i%512 == 0 {
					q.Drain(func(*accesslog.Record) {})
				}
			}
		})
	}
}
