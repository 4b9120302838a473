package relay

import (
	"net/netip"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// The interim records' schedule on the loop's own clock: a loop that never
// runs, whose timers the test fires at the instants they are armed for,
// and 2,000 relaying connections made by hand (no sockets: a record reads
// only the connection's fields). Each connection gets its connect record,
// then one interim record per interval, never two closer than an interval
// nor further apart than an interval and a tick; no look takes more than
// accesslog.Budget; a connection that ends gets no more; and with the
// access log off the timer stops.
func TestInterimRecordsOnLoopClock(t *testing.T) {
	const n = 2000
	interval := int64(time.Second)
	tick := interval / accesslog.Ticks
	r, err := reactor.New(reactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Discard)
	sh := NewShared(100000, nil, nil)
	l := New(r, sh)
	q := accesslog.NewQueue(1, 1<<15)
	q.SetEvents(time.Duration(interval), true)
	sh.SetAccessLog(q)

	p := &pool.Pool{Name: "web"}
	f := NewFront("web", p)
	be := &pool.Backend{Addr: "10.0.0.1:80"}
	conns := map[netip.AddrPort]*conn{}
	for i := range n {
		src := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.7"), uint16(1000+i))
		c := &conn{l: l, f: f, pool: p, src: src, phase: phaseRelaying, backend: be}
		c.streams[0].Delivered = int64(i)
		conns[src] = c
		c.opened()
	}
	var connects int
	q.Drain(func(r *accesslog.Record) {
		if r.Event == accesslog.EventConnect && r.Backend == be.Addr && r.Reason == "" && r.Result == "" {
			connects++
		}
	})
	if connects != n {
		t.Fatalf("%d connect records, want %d", connects, n)
	}

	seen := map[netip.AddrPort][]time.Duration{}
	look := func(now int64) int {
		r.FireDue(now)
		return q.Drain(func(r *accesslog.Record) {
			c := conns[r.Client]
			if r.Event != accesslog.EventInterim || c == nil || r.ToBackend != c.streams[0].Delivered || r.Reason != "" {
				t.Fatalf("unexpected record %+v", *r)
			}
			if r.Duration != time.Duration(now) {
				t.Fatalf("interim record at %v says a duration of %v", time.Duration(now), r.Duration)
			}
			seen[r.Client] = append(seen[r.Client], r.Duration)
		})
	}
	// until fires the loop's timers at each instant they are armed for,
	// up to end.
	until := func(end int64) {
		for l.interimTimer.Armed() && l.interimTimer.At() <= end {
			if got := look(l.interimTimer.At()); got > accesslog.Budget(n) {
				t.Fatalf("a look wrote %d records, want at most %d", got, accesslog.Budget(n))
			}
		}
	}
	until(6 * interval)
	// All opened at once, their first records spread over the looks after
	// the first interval, Budget per look.
	firstBy := time.Duration(interval + int64((n+accesslog.Budget(n)-1)/accesslog.Budget(n))*tick)
	for src, ds := range seen {
		if ds[0] < time.Duration(interval) || ds[0] > firstBy {
			t.Fatalf("%v: first interim record after %v, want within [%v, %v]", src, ds[0], time.Duration(interval), firstBy)
		}
		for i := 1; i < len(ds); i++ {
			if gap := ds[i] - ds[i-1]; gap < time.Duration(interval) || gap > time.Duration(interval+tick) {
				t.Fatalf("%v: interim records %v apart", src, gap)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d connections got interim records, want %d", len(seen), n)
	}

	// Half of them end: only the others are written from then on.
	ended := 0
	for _, c := range conns {
		if ended < n/2 {
			c.unlist()
			delete(conns, c.src) // a record of it fails the test
			ended++
		}
	}
	clear(seen)
	until(9 * interval)
	for src, ds := range seen {
		if len(ds) < 2 || len(ds) > 3 {
			t.Fatalf("%v: %d interim records in 3 intervals", src, len(ds))
		}
	}
	if len(seen) != n/2 || l.interim.Len() != n/2 {
		t.Fatalf("%d connections written, %d listed: want %d", len(seen), l.interim.Len(), n/2)
	}

	// A look allocates nothing: the records go into the ring by value.
	if a := testing.AllocsPerRun(100, func() {
		l.interimDue(l.interimTimer.At())
		q.Drain(func(*accesslog.Record) {})
	}); a != 0 {
		t.Errorf("%v allocations per look, want 0", a)
	}

	sh.SetAccessLog(nil)
	look(l.interimTimer.At())
	if l.interimTimer.Armed() || l.interim.Len() != 0 {
		t.Fatalf("access log off: timer armed %v, %d listed", l.interimTimer.Armed(), l.interim.Len())
	}
}

// A long connection through a running loop, on real sockets: its connect
// record when the backend connection is established, interim records at
// the interval with the bytes so far, and its close record.
func TestInterimRecordsOfALongConnection(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "web", backends: []string{k.Addr}}}})
	interval := 200 * time.Millisecond // below [log]'s floor: the queue takes any
	q := accesslog.NewQueue(1, 1024)
	q.SetEvents(interval, true)
	h.sh.SetAccessLog(q)

	p := h.open("web", k)
	var got []accesslog.Record
	take := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; records: %+v", what, got)
			}
			time.Sleep(10 * time.Millisecond)
			q.Drain(func(r *accesslog.Record) { got = append(got, *r) }) // the test is the queue's one consumer
		}
	}
	count := func(ev accesslog.Event, toBackend int64) int {
		n := 0
		for _, r := range got {
			if r.Event == ev && r.ToBackend == toBackend {
				n++
			}
		}
		return n
	}
	take("the connect record", func() bool { return count(accesslog.EventConnect, 0) == 1 })
	p.ping(t) // 4 bytes to the backend
	take("two interim records since", func() bool { return count(accesslog.EventInterim, 4) >= 2 })
	p.close()
	take("the close record", func() bool { return count(accesslog.EventClose, 4) == 1 })

	if c := got[0]; c.Event != accesslog.EventConnect || c.Backend != k.Addr || c.Reason != "" || c.ToBackend != 0 {
		t.Fatalf("first record %+v, want the connect record", c)
	}
	last := got[len(got)-1]
	if last.Event != accesslog.EventClose || last.Reason == "" || last.Result != ResultOK.String() || last.ToBackend != 4 {
		t.Fatalf("last record %+v, want the close record with the 4 bytes", last)
	}
	var prev time.Duration
	for _, r := range got[1 : len(got)-1] {
		if r.Event != accesslog.EventInterim || r.Backend != k.Addr || r.Listener != "web" || r.Client != last.Client {
			t.Fatalf("record %+v between connect and close is no interim record of the connection", r)
		}
		if prev != 0 && r.Duration-prev < interval {
			t.Fatalf("interim records %v apart, want at least the interval %v", r.Duration-prev, interval)
		}
		if r.ToBackend != 0 && r.ToBackend != 4 {
			t.Fatalf("interim record with %d bytes to the backend", r.ToBackend)
		}
		prev = r.Duration
	}
	if got[len(got)-2].ToBackend != 4 {
		t.Fatalf("the last interim record says %d bytes to the backend, want the 4 sent", got[len(got)-2].ToBackend)
	}
}

// A connection handed over in an upgrade writes nothing as it leaves (no
// close record: it has not ended); where it is adopted it is listed for
// interim records again, and its one close record covers the whole
// connection.
func TestHandedOverConnectionRecords(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	q := accesslog.NewQueue(2, 1024)
	q.SetEvents(time.Hour, true)
	h.sh.SetAccessLog(q)
	p := h.open("p", k)
	roundTrip(t, p, "hello", "world!")
	from, to := holder(t, h)
	moveAll(t, h, from, to, false)
	listed := 0
	h.on(to, func() { listed = to.interim.Len() })
	if listed != 1 {
		t.Fatalf("%d connections listed for interim records on the adopting loop, want the one", listed)
	}
	roundTrip(t, p, "after", "again")
	p.close()
	var got []accesslog.Record
	testnet.Eventually(t, "the close record", func() bool {
		q.Drain(func(r *accesslog.Record) { got = append(got, *r) })
		return len(got) == 2
	})
	if got[0].Event == accesslog.EventClose {
		got[0], got[1] = got[1], got[0] // the two loops' rings are drained one after the other
	}
	if got[0].Event != accesslog.EventConnect || got[1].Event != accesslog.EventClose {
		t.Fatalf("records %+v, want the connect and the close alone", got)
	}
	if c := got[1]; c.ToBackend != 10 || c.ToClient != 11 || c.Result != ResultOK.String() {
		t.Fatalf("close record %+v, want the whole connection's 10 and 11 bytes", c)
	}
}
