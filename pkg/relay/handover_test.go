package relay

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
)

// The hand-over of a binary upgrade, inside one process: a connection
// detached from the loop that holds it and adopted by another loop is the
// same connection, its bytes in flight and half-closes with it. Between
// two processes the descriptors travel over a unix socket (pkg/handoff);
// here the adopting loop takes the very descriptors the other let go.

// holder is the loop holding the harness's one connection.
func holder(t *testing.T, h *harness) (from, to *Loop) {
	t.Helper()
	for i, l := range h.loops {
		n := 0
		h.on(l, func() { n = l.held.len() })
		if n == 1 {
			return l, h.loops[(i+1)%len(h.loops)]
		}
	}
	t.Fatalf("no loop holds the connection:%s", h.describeConns())
	return nil, nil
}

// moveAll detaches every connection of from and adopts them on to (stay:
// adopted to be kept), as a hand-over would, and lets them go.
func moveAll(t *testing.T, h *harness, from, to *Loop, stay bool) *flow.Batch {
	t.Helper()
	b := &flow.Batch{}
	pending := 0
	h.on(from, func() { pending = from.Detach(b) })
	if pending != 0 {
		t.Fatalf("Detach left %d pending", pending)
	}
	var adopted []*Adopted
	h.on(to, func() {
		for i := range b.Relays {
			r := &b.Relays[i]
			f := h.front(r.Listener).Front
			p := f.Pool()
			be, ok := p.ByIdentity(r.Backend)
			if !ok {
				t.Errorf("no backend %s", r.Backend)
				continue
			}
			a, err := to.AdoptRelay(r, b, f, p, be)
			if err != nil {
				t.Errorf("adopt relay %d: %v", i, err)
				continue
			}
			adopted = append(adopted, a)
		}
		for i := range b.Queued {
			q := &b.Queued[i]
			f := h.front(q.Listener).Front
			a, err := to.AdoptQueued(q, b, f, f.Pool())
			if err != nil {
				t.Errorf("adopt queued %d: %v", i, err)
				continue
			}
			adopted = append(adopted, a)
		}
		for _, a := range adopted {
			if stay {
				a.Stay()
			}
			a.Go()
		}
	})
	return b
}

func TestHandOverCarriesARelayOnAnotherLoop(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	p := h.open("p", k)
	defer p.close()
	roundTrip(t, p, "hello", "world!")
	from, to := holder(t, h)
	be := h.front("p").Pool().Backends()[0]

	b := &flow.Batch{}
	h.on(from, func() { from.Detach(b) })
	if len(b.Relays) != 1 {
		t.Fatalf("detached %d relays, want 1", len(b.Relays))
	}
	r := b.Relays[0]
	if r.Streams[0].Delivered != 5 || r.Streams[1].Delivered != 6 || r.Listener != "p" || r.Backend != be.ID {
		t.Errorf("record %+v: want 5 bytes up, 6 down, listener p, backend %s", r, be.ID)
	}
	if n := h.sh.Active.Load(); n != 0 {
		t.Errorf("detached: the server still counts %d connections", n)
	}
	if n := be.Active(); n != 0 {
		t.Errorf("detached: the backend still counts %d", n)
	}
	// Bytes sent while no loop holds the connection wait in the kernel.
	p.client.Write([]byte("while detached"))

	h.on(to, func() {
		f := h.front("p").Front
		a, err := to.AdoptRelay(&b.Relays[0], b, f, f.Pool(), be)
		if err != nil {
			t.Fatal(err)
		}
		// Held still: nothing moves before Go.
		if got := to.Conns(); got != 0 {
			t.Errorf("held: the loop counts %d, want 0", got)
		}
		a.Go()
	})
	if n := be.Active(); n != 1 {
		t.Errorf("adopted: the backend counts %d, want 1", n)
	}
	p.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, len("while detached"))
	if _, err := io.ReadFull(p.backend, got); err != nil || string(got) != "while detached" {
		t.Fatalf("backend read %q, %v", got, err)
	}
	roundTrip(t, p, "after", "again")
	var delivered [2]int64
	h.on(to, func() {
		for c := range to.conns {
			delivered = [2]int64{c.streams[0].Delivered, c.streams[1].Delivered}
		}
	})
	if delivered != [2]int64{5 + 14 + 5, 6 + 5} {
		t.Errorf("counted %v bytes after the move, want the whole connection's [24 11]", delivered)
	}
}

// roundTrip sends up from the client to the backend, then down back.
func roundTrip(t *testing.T, p *proxied, up, down string) {
	t.Helper()
	for _, leg := range []struct {
		from, to *net.TCPConn
		msg      string
	}{{p.client, p.backend, up}, {p.backend, p.client, down}} {
		if _, err := leg.from.Write([]byte(leg.msg)); err != nil {
			t.Fatal(err)
		}
		leg.to.SetReadDeadline(time.Now().Add(20 * time.Second))
		got := make([]byte, len(leg.msg))
		if _, err := io.ReadFull(leg.to, got); err != nil || string(got) != leg.msg {
			t.Fatalf("read %q, %v; want %q", got, err, leg.msg)
		}
	}
}

// A client that stops reading while its backend sends leaves bytes in the
// loop (a pipe, or a held buffer): they go with the connection, ahead of
// everything after them.
func TestHandOverKeepsTheBytesInFlight(t *testing.T) {
	for _, noPipes := range []bool{false, true} {
		name := map[bool]string{false: "spliced", true: "copied"}[noPipes]
		t.Run(name, func(t *testing.T) {
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{loops: 2, noPipes: noPipes, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
			p := h.open("p", k)
			defer p.close()
			data := randomBytes(t, 16<<20)
			sent := make(chan error, 1)
			go func() {
				_, err := p.backend.Write(data)
				sent <- err
			}()
			// Until the loop holds bytes the client has not taken.
			if !testnet.WaitUntil(20*time.Second, func() bool {
				cs := h.conns()
				return len(cs) == 1 && cs[0].pending[1]
			}) {
				t.Fatalf("the loop never held bytes for the client:%s", h.describeConns())
			}
			from, to := holder(t, h)
			b := moveAll(t, h, from, to, false)
			st := b.Relays[0].Streams[1]
			if noPipes && len(st.Held) == 0 || !noPipes && st.InPipe == 0 && len(st.Held) == 0 {
				t.Errorf("record's stream to the client holds nothing: %+v", st)
			}
			got := make([]byte, len(data))
			p.client.SetReadDeadline(time.Now().Add(30 * time.Second))
			if n, err := io.ReadFull(p.client, got); err != nil {
				t.Fatalf("client read %d of %d bytes: %v%s", n, len(data), err, h.describeConns())
			}
			if !bytes.Equal(got, data) {
				t.Fatal("the client's bytes differ from what the backend sent")
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A half-closed connection stays half-closed: the client's FIN already
// passed on, the backend goes on sending, then ends its side.
func TestHandOverKeepsAHalfClose(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	p := h.open("p", k)
	defer p.close()
	p.client.Write([]byte("request"))
	p.client.CloseWrite()
	p.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(p.backend); err != nil || string(b) != "request" {
		t.Fatalf("backend read %q, %v before the client's FIN", b, err)
	}
	from, to := holder(t, h)
	b := moveAll(t, h, from, to, false)
	if !b.Relays[0].Streams[0].Ended || b.Relays[0].Streams[1].Ended {
		t.Fatalf("record: want the client's direction ended, the backend's not: %+v", b.Relays[0].Streams)
	}
	p.backend.Write([]byte("reply after the move"))
	p.backend.CloseWrite()
	p.client.SetReadDeadline(time.Now().Add(20 * time.Second))
	if got, err := io.ReadAll(p.client); err != nil || string(got) != "reply after the move" {
		t.Fatalf("client read %q, %v", got, err)
	}
	if !testnet.WaitUntil(20*time.Second, func() bool { return h.front("p").Closed[CloseCompleted].Load() == 1 }) {
		t.Fatalf("the connection did not end as completed:%s", h.describeConns())
	}
}

// queuedBehind is a harness of two loops whose one backend takes one
// client at a time, first relaying through it, and second's client
// queued for its slot on loop l as c. Close first to serve second.
type queuedBehind struct {
	h      *harness
	k      *testnet.Taker
	first  *proxied
	second *net.TCPConn
	l      *Loop
	c      *conn
}

func newQueuedBehind(t *testing.T) *queuedBehind {
	t.Helper()
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{{name: "p",
		keys: "queue_timeout = \"30s\"\n[[pool.p.backend]]\naddr = \"" + k.Addr + "\"\nmax_connections = 1\n"}}})
	q := &queuedBehind{h: h, k: k, first: h.open("p", k), second: h.dial("p")}
	t.Cleanup(func() { q.first.close(); q.second.Close() })
	if !testnet.WaitUntil(20*time.Second, func() bool {
		for _, l := range h.loops {
			h.on(l, func() {
				for c := range l.conns {
					if c.phase == phaseQueued {
						q.l, q.c = l, c
					}
				}
			})
		}
		return q.c != nil
	}) {
		t.Fatalf("the second client never queued:%s", h.describeConns())
	}
	return q
}

// served closes first, whose slot goes to second, and checks second is
// relayed to the backend.
func (q *queuedBehind) served(t *testing.T) {
	t.Helper()
	q.first.close()
	p := &proxied{client: q.second, backend: q.k.Next(t)}
	defer p.close()
	roundTrip(t, p, "served", "at last")
}

// A client waiting for a backend slot moves with its place in the wait,
// and is served on its new loop once a slot frees.
func TestHandOverCarriesAQueuedClient(t *testing.T) {
	q := newQueuedBehind(t)
	h := q.h
	to := h.loops[(q.l.r.ID()+1)%2]
	b := moveAll(t, h, q.l, to, false)
	if len(b.Queued) != 1 {
		t.Fatalf("moved %d queued clients, want 1", len(b.Queued))
	}
	q.served(t)
	if n := h.front("p").Queued[queueServed].Load(); n != 1 {
		t.Errorf("queue results: %d served, want 1", n)
	}
}

// A queued client moves with what it spent of its connect budget and, a
// routed listener's, with the server name it asked for and its route:
// the new process dials it on the budget it had left, and its access
// line, PROXY header and hash key name what the old one read.
func TestHandOverCarriesAQueuedClientsBudgetAndRoute(t *testing.T) {
	q := newQueuedBehind(t)
	h := q.h
	f := h.front("p").Front
	api := &Route{Name: "api", Pool: f.Pool()}
	f.SetRouting(&Routing{Routes: []*Route{api}}) // as a reload would: the clients are in already
	h.on(q.l, func() {
		q.c.spent = &spentBudget{left: int64(3 * time.Second), budgeted: true, forced: true}
		q.c.sni = &routed{route: api, serverName: "api.example.com"}
	})
	to := h.loops[(q.l.r.ID()+1)%2]
	b := moveAll(t, h, q.l, to, false)
	if len(b.Queued) != 1 {
		t.Fatalf("moved %d queued clients, want 1", len(b.Queued))
	}
	if r := b.Queued[0]; r.BudgetLeft != int64(3*time.Second) || !r.Budgeted || !r.Forced || r.ServerName != "api.example.com" || r.Route != "api" {
		t.Fatalf("the record: %+v", r)
	}
	h.on(to, func() {
		n := 0
		for c := range to.conns {
			if c.phase != phaseQueued {
				continue
			}
			n++
			if s := c.spent; s == nil || s.left != int64(3*time.Second) || !s.budgeted || !s.forced {
				t.Errorf("adopted budget %+v, want 3s left, budgeted, forced", s)
			}
			if r := c.sni; r == nil || r.serverName != "api.example.com" || r.route != api {
				t.Errorf("adopted route %+v, want api.example.com on route api", r)
			}
		}
		if n != 1 {
			t.Errorf("%d queued clients on the new loop, want 1", n)
		}
	})
	q.served(t)
	if n := api.Clients.Load(); n != 0 {
		t.Errorf("the route counted the moved client again: %d", n)
	}
}

// A relaying routed client moves with the server name it asked for and
// its route, for its access line in the new process.
func TestHandOverCarriesARelaysRoute(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	p := h.open("p", k)
	defer p.close()
	roundTrip(t, p, "before", "the move")
	f := h.front("p").Front
	web := &Route{Name: "web", Pool: f.Pool()}
	f.SetRouting(&Routing{Routes: []*Route{web}})
	from, to := holder(t, h)
	h.on(from, func() {
		for c := range from.conns {
			c.sni = &routed{route: web, serverName: "www.example.com"}
		}
	})
	b := moveAll(t, h, from, to, false)
	if len(b.Relays) != 1 || b.Relays[0].ServerName != "www.example.com" || b.Relays[0].Route != "web" {
		t.Fatalf("the records: %+v", b.Relays)
	}
	h.on(to, func() { // on the loop: the route goes back to its free list at the close
		n := 0
		for c := range to.conns {
			n++
			if r := c.sni; r == nil || r.serverName != "www.example.com" || r.route != web {
				t.Errorf("adopted route %+v, want www.example.com on route web", r)
			}
		}
		if n != 1 {
			t.Errorf("%d connections on the new loop, want 1", n)
		}
	})
	roundTrip(t, p, "after", "the move")
}

// A connection adopted back to stay (the other process refused it) is
// never detached again: the hand-over would go round forever.
func TestAdoptedToStayIsNotDetachedAgain(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	p := h.open("p", k)
	defer p.close()
	from, to := holder(t, h)
	moveAll(t, h, from, to, true)
	b := &flow.Batch{}
	pending := -1
	h.on(to, func() { pending = to.Detach(b) })
	if b.Len() != 0 || pending != 0 {
		t.Fatalf("detached %d (pending %d) of a loop holding only a connection adopted to stay", b.Len(), pending)
	}
	roundTrip(t, p, "still", "here")
}

// A full batch stops the detaching and says more is left.
func TestDetachStopsAtAFullBatch(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	var ps []*proxied
	for range 3 {
		p := h.open("p", k)
		defer p.close()
		roundTrip(t, p, "up", "down")
		ps = append(ps, p)
	}
	l := h.loops[0]
	b := &flow.Batch{FDs: make([]int, flow.MaxFDs-flow.MaxRecordFDs-1)} // room for one more record
	for i := range b.FDs {
		b.FDs[i] = -1
	}
	pending := 0
	h.on(l, func() { pending = l.Detach(b) })
	if len(b.Relays) != 1 || pending < 1 {
		t.Fatalf("detached %d with room for one, pending %d (want 1, >= 1)", len(b.Relays), pending)
	}
	// Give the detached one back, as a refused record would be.
	h.on(l, func() {
		r := &b.Relays[0]
		f := h.front("p").Front
		be, _ := f.Pool().ByIdentity(r.Backend)
		a, err := l.AdoptRelay(r, b, f, f.Pool(), be)
		if err != nil {
			t.Fatal(err)
		}
		a.Go()
	})
	for _, p := range ps {
		roundTrip(t, p, "up", "down")
	}
}
