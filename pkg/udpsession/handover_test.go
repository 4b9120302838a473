package udpsession

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/flow"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// These tests hand sessions from one rig (the old process) to another
// serving duplicates of the same listener sockets (the new one), as an
// upgrade does: the old rig stops reading its listener sockets first
// (UnwatchListeners), then the new rig is made, so the client's datagrams
// reach the new rig's loops only.

// takeOver stops old reading its listener sockets and returns the rig
// that takes them over, with options o.
func takeOver(t *testing.T, old *udpRig, backends []string, o udpRigOpts) *udpRig {
	t.Helper()
	for _, l := range old.loops {
		l.UnwatchListeners()
		old.on(l, func() {}) // the unwatch has run
	}
	o.sameSockets = old
	return newUDPRig(t, backends, o)
}

// detach takes every session off r's loops into one batch.
func detach(t *testing.T, r *udpRig) *flow.Batch {
	t.Helper()
	b := &flow.Batch{}
	for _, l := range r.loops {
		var pending int
		r.on(l, func() { pending = l.Detach(b) })
		if pending != 0 {
			t.Fatalf("Detach left %d pending with room in the batch", pending)
		}
	}
	return b
}

// transit is b as the receiving process gets it: the descriptors are
// duplicates, and the sender's close (the sender closes its own once the
// receiver holds the sessions). The test owns the copies until they are
// adopted.
func transit(t *testing.T, b *flow.Batch) *flow.Batch {
	t.Helper()
	got := &flow.Batch{Sessions: slices.Clone(b.Sessions)}
	for _, fd := range b.FDs {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		got.FDs = append(got.FDs, dup)
	}
	return got
}

// adopt puts every session of b together on the loop of r that serves
// its socket, held until goAll.
func adopt(t *testing.T, r *udpRig, b *flow.Batch) []*Adopted {
	t.Helper()
	var as []*Adopted
	for i := range b.Sessions {
		rec := &b.Sessions[i]
		var serving []*Loop
		for _, l := range r.loops {
			if l.Serves(rec.Socket) {
				serving = append(serving, l)
			}
		}
		if len(serving) != 1 {
			t.Fatalf("session of %s: %d loops serve its socket %d, want one", rec.Client, len(serving), rec.Socket)
		}
		be, ok := r.pool.ByIdentity(rec.Backend)
		if !ok {
			t.Fatalf("session of %s: no backend %s", rec.Client, rec.Backend)
		}
		var a *Adopted
		var err error
		r.on(serving[0], func() { a, err = serving[0].AdoptSession(rec, b, r.front, r.pool, be) })
		if err != nil {
			t.Fatalf("session of %s: %v", rec.Client, err)
		}
		as = append(as, a)
	}
	return as
}

func goAll(r *udpRig, as []*Adopted) {
	for _, a := range as {
		r.on(a.s.u.l, a.Go)
	}
}

// rawBackend is a UDP socket the test answers from by hand.
func rawBackend(t *testing.T) *net.UDPConn {
	t.Helper()
	be, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// receive reads one datagram, waiting generously.
func receive(t *testing.T, c *net.UDPConn) (string, *net.UDPAddr) {
	t.Helper()
	buf := make([]byte, 1<<16)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n]), from
}

// echoSession is a rig on an echo backend and a client whose session is
// open (its first datagram answered).
func echoSession(t *testing.T, o udpRigOpts) (*testnet.UDPBackend, *udpRig, *net.UDPConn) {
	t.Helper()
	be := testnet.StartUDPBackend(t, "a", "")
	r := newUDPRig(t, []string{be.Addr}, o)
	c := r.client()
	echoes(t, c, "one")
	return be, r, c
}

// echoes sends p and waits for the echo.
func echoes(t *testing.T, c *net.UDPConn, p string) {
	t.Helper()
	if got, err := replyWithin(c, []byte(p), 20*time.Second); err != nil || string(got) != p {
		t.Fatalf("reply %q, %v; want the echo of %q", got, err, p)
	}
}

func send(t *testing.T, c *net.UDPConn, p string) {
	t.Helper()
	if _, err := c.Write([]byte(p)); err != nil {
		t.Fatal(err)
	}
}

// A session moved to the new process keeps its backend socket: the
// backend sees the same source port after the move, a reply it sent while
// the session was between the processes reaches the client, and the
// counts move with it.
func TestUDPHandedOverSessionKeepsItsBackendSocket(t *testing.T) {
	be := rawBackend(t)
	backends := []string{be.LocalAddr().String()}
	old := newUDPRig(t, backends, udpRigOpts{loops: 2}) // one of them serves the client's socket
	c := old.client()
	send(t, c, "one")
	_, from := receive(t, be)
	be.WriteToUDP([]byte("r1"), from)
	if got, _ := receive(t, c); got != "r1" {
		t.Fatalf("reply %q before the move", got)
	}
	testnet.Eventually(t, "the reply to be counted", func() bool { return old.front.DatagramsToClient.Load() == 1 })

	nw := takeOver(t, old, backends, udpRigOpts{})
	b := detach(t, old)
	if len(b.Sessions) != 1 || len(b.FDs) != 1 {
		t.Fatalf("detached %d sessions with %d descriptors, want the one", len(b.Sessions), len(b.FDs))
	}
	rec := b.Sessions[0]
	client := c.LocalAddr().String()
	oldBackend := old.pool.Backends()[0]
	if rec.Listener != "u" || rec.Pool != "u" || rec.Backend != oldBackend.ID || rec.BackendAddr != oldBackend.Addr ||
		rec.Client != client || rec.Requests != 1 || rec.Responses != 1 || rec.Verdict != nil || rec.FD != 0 || rec.Idle < 0 {
		t.Fatalf("record %+v", rec)
	}
	for i := range old.loops {
		if old.loops[i].Serves(rec.Socket) != nw.loops[i].Serves(rec.Socket) {
			t.Fatalf("loop %d of one process serves socket %d and that of the other does not", i, rec.Socket)
		}
	}
	if n := old.front.Sessions.Load(); n != 0 || old.front.HandedOut.Load() != 1 || oldBackend.Active() != 0 || old.front.sockets.Load() != 0 {
		t.Fatalf("the old side still counts: %d sessions, %d handed out, backend %d, sockets %d",
			n, old.front.HandedOut.Load(), oldBackend.Active(), old.front.sockets.Load())
	}

	be.WriteToUDP([]byte("between"), from) // the session is in neither loop
	as := adopt(t, nw, transit(t, b))
	goAll(nw, as)
	if got, _ := receive(t, c); got != "between" {
		t.Fatalf("reply %q after the move, want the one sent while it moved", got)
	}
	send(t, c, "two")
	got, from2 := receive(t, be)
	if got != "two" || from2.String() != from.String() {
		t.Fatalf("the backend got %q from %s after the move, want \"two\" from %s (the same socket)", got, from2, from)
	}
	be.WriteToUDP([]byte("r2"), from2)
	if got, _ := receive(t, c); got != "r2" {
		t.Fatalf("reply %q after the move", got)
	}
	newBackend := nw.pool.Backends()[0]
	if s, in, started := nw.front.Sessions.Load(), nw.front.HandedIn.Load(), nw.front.Started.Load(); s != 1 || in != 1 || started != 0 {
		t.Errorf("the new side counts %d sessions, %d handed in, %d started; want 1, 1, 0", s, in, started)
	}
	if n := newBackend.Active(); n != 1 {
		t.Errorf("the new side's backend counts %d sessions, want 1", n)
	}
	testnet.Eventually(t, "both replies after the move to be counted", func() bool { return nw.front.DatagramsToClient.Load() == 2 })
}

// The listener's requests and responses limits count the datagrams of
// the whole session, before and after the move.
func TestUDPHandedOverSessionKeepsItsLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*Settings)
		check func(t *testing.T, nw *udpRig, c *net.UDPConn, be *testnet.UDPBackend)
	}{
		{"responses", func(s *Settings) { s.Responses = 3 }, func(t *testing.T, nw *udpRig, c *net.UDPConn, be *testnet.UDPBackend) {
			for _, p := range []string{"two", "three"} {
				echoes(t, c, p)
			}
			testnet.Eventually(t, "the session to end after its third response, the first before the move", func() bool {
				return nw.front.Ended[EndResponses].Load() == 1
			})
		}},
		{"requests", func(s *Settings) { s.Requests = 2 }, func(t *testing.T, nw *udpRig, c *net.UDPConn, be *testnet.UDPBackend) {
			echoes(t, c, "two")
			if n := nw.front.Started.Load(); n != 0 {
				t.Fatalf("%d sessions started for the second request", n)
			}
			echoes(t, c, "three")
			if n, src := nw.front.Started.Load(), be.Sources(); n != 1 || src != 2 {
				t.Fatalf("the third request started %d sessions (%d source ports): the second, after the move, retires the session", n, src)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, old, c := echoSession(t, udpRigOpts{settings: tc.set})
			nw := takeOver(t, old, []string{be.Addr}, udpRigOpts{settings: tc.set})
			goAll(nw, adopt(t, nw, transit(t, detach(t, old))))
			tc.check(t, nw, c, be)
		})
	}
}

// verdictRigs are an old rig whose session to be is dialing (its first
// datagram unanswered, reply_timeout a minute) and the new rig taking
// over, its pool changed by newPool, and the detached batch.
func verdictRigs(t *testing.T, newPool func(*config.Pool)) (old, nw *udpRig, c *net.UDPConn, be *net.UDPConn, from *net.UDPAddr, b *flow.Batch) {
	t.Helper()
	be = rawBackend(t)
	backends := []string{be.LocalAddr().String()}
	old = newUDPRig(t, backends, udpRigOpts{pool: func(p *config.Pool) { p.ReplyTimeout = time.Minute }})
	c = old.client()
	send(t, c, "q")
	_, from = receive(t, be)
	nw = takeOver(t, old, backends, udpRigOpts{pool: newPool})
	b = detach(t, old)
	if len(b.Sessions) != 1 {
		t.Fatalf("detached %d sessions", len(b.Sessions))
	}
	v := b.Sessions[0].Verdict
	if v == nil || v.Force || v.Left <= 0 || v.Left > int64(time.Minute) {
		t.Fatalf("verdict %+v, want an open one with at most reply_timeout left", v)
	}
	if ok, failed := old.pool.Backends()[0].Dials(pool.DialClient); ok+failed != 0 {
		t.Fatalf("the old side settled the dial (%d, %d); the new one is to", ok, failed)
	}
	return old, nw, c, be, from, b
}

// A first datagram's breaker verdict still open goes with the session
// and settles on the new side, judged by the generation its dial
// captured in the old process: a reply after the backend's breaker
// tripped is a stale success and closes nothing.
func TestUDPHandedOverVerdictKeepsItsGeneration(t *testing.T) {
	_, nw, c, be, from, b := verdictRigs(t, func(p *config.Pool) {
		p.ReplyTimeout = 100 * time.Millisecond
		p.Breaker.CountNoReply = true
		p.Breaker.Failures = 1
		p.Breaker.Cooldown, p.Breaker.MaxCooldown = time.Hour, time.Hour
	})
	backend := nw.pool.Backends()[0]
	// A client of the new side whose datagram goes unanswered trips the
	// breaker (count_no_reply, one failure).
	send(t, nw.client(), "unanswered")
	testnet.Eventually(t, "the breaker to trip", func() bool { return backend.Trips() == 1 })
	be.WriteToUDP([]byte("late answer"), from) // the answer to the first datagram, while it moves
	goAll(nw, adopt(t, nw, transit(t, b)))
	if got, _ := receive(t, c); got != "late answer" {
		t.Fatalf("reply %q", got)
	}
	testnet.Eventually(t, "the answer to settle as a stale success", func() bool { return backend.StaleResults() == 1 })
	if ok, failed := backend.Dials(pool.DialClient); ok != 1 || failed != 1 {
		t.Errorf("dials: %d succeeded, %d failed; want the handed-over one's success and the other's failure", ok, failed)
	}
	if !backend.Breaker().Open || backend.Trips() != 1 {
		t.Errorf("breaker %+v after %d trips: a success captured before the trip must not close it", backend.Breaker(), backend.Trips())
	}
}

// Without a trip, the same answer is the dial's success, on the new side.
func TestUDPHandedOverVerdictSettlesOnTheNewSide(t *testing.T) {
	_, nw, c, be, from, b := verdictRigs(t, nil)
	be.WriteToUDP([]byte("answer"), from)
	goAll(nw, adopt(t, nw, transit(t, b)))
	if got, _ := receive(t, c); got != "answer" {
		t.Fatalf("reply %q", got)
	}
	backend := nw.pool.Backends()[0]
	testnet.Eventually(t, "the answer to settle the dial", func() bool { ok, _ := backend.Dials(pool.DialClient); return ok == 1 })
	if backend.StaleResults() != 0 || nw.front.Unanswered.Load() != 0 {
		t.Errorf("%d stale results, %d unanswered", backend.StaleResults(), nw.front.Unanswered.Load())
	}
}

// The reply timeout goes on from what was left of it in the old process,
// not from the new pool's reply_timeout.
func TestUDPHandedOverVerdictTimesOutWithWhatWasLeft(t *testing.T) {
	_, nw, _, _, _, b := verdictRigs(t, func(p *config.Pool) {
		p.ReplyTimeout = time.Hour
		p.Breaker.CountNoReply = true
	})
	b.Sessions[0].Verdict.Left = int64(50 * time.Millisecond) // as if the old process had waited the rest
	goAll(nw, adopt(t, nw, transit(t, b)))
	backend := nw.pool.Backends()[0]
	testnet.Eventually(t, "the first datagram to go unanswered after what was left", func() bool {
		_, failed := backend.Dials(pool.DialClient)
		return nw.front.Unanswered.Load() == 1 && failed == 1
	})
}

// A session adopted back to stay (the new process refused it) is not
// detached again, and goes on where it was.
func TestUDPStayingSessionIsNotDetachedAgain(t *testing.T) {
	be, r, c := echoSession(t, udpRigOpts{})
	as := adopt(t, r, transit(t, detach(t, r)))
	for _, a := range as {
		a.Stay()
	}
	goAll(r, as)
	if b := detach(t, r); len(b.Sessions) != 0 {
		t.Fatalf("detached %d sessions adopted to stay", len(b.Sessions))
	}
	echoes(t, c, "two")
	if n := be.Sources(); n != 1 {
		t.Errorf("the backend saw %d source ports, want the one socket", n)
	}
	if s, out, in := r.front.Sessions.Load(), r.front.HandedOut.Load(), r.front.HandedIn.Load(); s != 1 || out != 1 || in != 1 {
		t.Errorf("%d sessions, %d handed out, %d in; want 1, 1, 1", s, out, in)
	}
}

// Detach stops at a full batch and says more is pending; the next batch
// takes the rest.
func TestUDPDetachStopsAtAFullBatch(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	r := newUDPRig(t, []string{be.Addr}, udpRigOpts{})
	clients := []*net.UDPConn{r.client(), r.client(), r.client()}
	for _, c := range clients {
		echoes(t, c, "q")
	}
	l := r.loops[0]
	full := &flow.Batch{Sessions: make([]flow.Session, flow.MaxRecords-1)} // room for one more
	var pending int
	r.on(l, func() { pending = l.Detach(full) })
	if pending < 1 || len(full.Sessions) != flow.MaxRecords || len(full.FDs) != 1 {
		t.Fatalf("pending %d with %d records and %d descriptors; want >= 1 with one session taken", pending, len(full.Sessions), len(full.FDs))
	}
	rest := detach(t, r)
	if len(rest.Sessions) != 2 {
		t.Fatalf("the next batch took %d sessions, want the other 2", len(rest.Sessions))
	}
	taken := &flow.Batch{Sessions: full.Sessions[flow.MaxRecords-1:], FDs: full.FDs}
	goAll(r, adopt(t, r, transit(t, taken)))
	goAll(r, adopt(t, r, transit(t, rest)))
	for _, c := range clients {
		echoes(t, c, "again")
	}
	if n := be.Sources(); n != 3 {
		t.Errorf("the backend saw %d source ports for 3 sessions", n)
	}
}

// A record that does not fit the loop (a descriptor its batch lacks, a
// socket or listener the loop does not serve, a socket address that is
// not the client's) is refused, and nothing of it is taken: the
// descriptor stays the caller's, open and out of the loop, and the
// record put right is adopted from it.
func TestUDPAdoptRefusesRecordsThatDoNotFit(t *testing.T) {
	_, r, c := echoSession(t, udpRigOpts{})
	b := transit(t, detach(t, r))
	good := b.Sessions[0]
	l := r.loops[0]
	backend := r.pool.Backends()[0]
	other := NewFront("other", *r.front.Settings())
	for _, tc := range []struct {
		name      string
		edit      func(*flow.Session)
		front     *Front
		noBackend bool
	}{
		{"descriptor past the batch", func(s *flow.Session) { s.FD = 1 }, nil, false},
		{"no descriptor", func(s *flow.Session) { s.FD = flow.NoFD }, nil, false},
		{"negative descriptor index", func(s *flow.Session) { s.FD = -7 }, nil, false},
		{"socket not served", func(s *flow.Session) { s.Socket = 0 }, nil, false},
		{"another listener", func(*flow.Session) {}, other, false},
		{"no backend", func(*flow.Session) {}, nil, true},
		{"socket address cut short", func(s *flow.Session) { s.Name = s.Name[:4] }, nil, false},
		{"socket address too long", func(s *flow.Session) { s.Name = append(slices.Clone(s.Name), make([]byte, 40)...) }, nil, false},
		{"another client's address", func(s *flow.Session) { s.Client = "127.0.0.1:1" }, nil, false},
		{"client unreadable", func(s *flow.Session) { s.Client = "nonsense" }, nil, false},
		{"control message too long", func(s *flow.Session) { s.Control = make([]byte, replyCtlSpace+1) }, nil, false},
	} {
		rec := good
		rec.Name = slices.Clone(good.Name)
		tc.edit(&rec)
		f, bk := r.front, backend
		if tc.front != nil {
			f = tc.front
		}
		if tc.noBackend {
			bk = nil
		}
		var err error
		var held int
		r.on(l, func() {
			_, err = l.AdoptSession(&rec, b, f, r.pool, bk)
			held = l.udps[0].held.len()
		})
		if !errors.Is(err, ErrAdoptRecord) {
			t.Errorf("%s: error %v, want %v", tc.name, err, ErrAdoptRecord)
		}
		if held != 0 || r.front.Sessions.Load() != 0 || r.front.sockets.Load() != 0 || backend.Active() != 0 {
			t.Errorf("%s: refused, yet %d held, %d sessions, %d sockets, backend %d", tc.name, held, r.front.Sessions.Load(), r.front.sockets.Load(), backend.Active())
		}
		if _, err := listener.SocketID(b.FDs[0]); err != nil {
			t.Fatalf("%s: the caller's descriptor was closed: %v", tc.name, err)
		}
	}
	goAll(r, adopt(t, r, b)) // registering the descriptor again would fail had a refusal left it in the loop
	echoes(t, c, "two")
}

// A session adopted but never let go (the loop stopped first) is closed
// with the loop, and was never counted.
func TestUDPAdoptedSessionClosedBeforeGoCountsNothing(t *testing.T) {
	be, old, _ := echoSession(t, udpRigOpts{})
	nw := takeOver(t, old, []string{be.Addr}, udpRigOpts{})
	b := transit(t, detach(t, old))
	id, err := listener.SocketID(b.FDs[0])
	if err != nil {
		t.Fatal(err)
	}
	as := adopt(t, nw, b)
	l := nw.loops[0]
	l.r.Stop()
	l.r.Wait()
	as[0].Go() // the loop has stopped: nothing runs beside this
	if now, err := listener.SocketID(b.FDs[0]); err == nil && now == id {
		t.Error("the adopted session's socket is still open after its loop stopped")
	}
	if s, in, n := nw.front.Sessions.Load(), nw.front.HandedIn.Load(), nw.pool.Backends()[0].Active(); s != 0 || in != 0 || n != 0 {
		t.Errorf("%d sessions, %d handed in, backend %d: a session that never went counts nothing", s, in, n)
	}
}

// A client's datagram that reaches the new process before its session
// does opens a session of its own there; once the handed-over session
// goes, the client's datagrams reach the backend through it again (the
// socket its backend knows), and the other still relays what its backend
// sends until it ends.
func TestUDPHandedOverSessionTakesItsClientBack(t *testing.T) {
	be := rawBackend(t)
	backends := []string{be.LocalAddr().String()}
	old := newUDPRig(t, backends, udpRigOpts{})
	c := old.client()
	send(t, c, "one")
	_, from := receive(t, be)
	nw := takeOver(t, old, backends, udpRigOpts{})
	send(t, c, "early") // the new process opens a session for it
	_, early := receive(t, be)
	if early.String() == from.String() {
		t.Fatal("the new process's session has the old one's source port")
	}
	goAll(nw, adopt(t, nw, transit(t, detach(t, old))))
	send(t, c, "two")
	if got, src := receive(t, be); got != "two" || src.String() != from.String() {
		t.Fatalf("the backend got %q from %s, want \"two\" from the handed-over session's %s", got, src, from)
	}
	be.WriteToUDP([]byte("to early"), early)
	if got, _ := receive(t, c); got != "to early" {
		t.Fatalf("reply %q through the session opened early", got)
	}
	if n := nw.front.Sessions.Load(); n != 2 {
		t.Errorf("%d sessions on the new side, want both", n)
	}
}

// Whatever a record's addresses hold, adopting them never panics, and
// what is accepted is consistent: the socket address the kernel would
// write for the client, and a reply control message that fits.
func FuzzAdoptAddrs(f *testing.F) {
	v4 := nameOf(netip.MustParseAddrPort("127.0.0.1:5353"))
	f.Add(slices.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&v4)), unix.SizeofSockaddrInet4)), "127.0.0.1:5353", []byte(nil))
	var v6 sockName
	v6.Family, v6.Port, v6.Scope_id = unix.AF_INET6, rawsys.Ntohs(53), 2
	v6.Addr = netip.MustParseAddr("fe80::1").As16()
	f.Add(slices.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&v6)), unix.SizeofSockaddrInet6)), "[fe80::1%2]:53", make([]byte, replyCtlSpace))
	f.Add([]byte{}, "", []byte{1})
	f.Fuzz(func(t *testing.T, name []byte, client string, ctl []byte) {
		s := &session{}
		if s.adoptAddrs(&flow.Session{Name: name, Client: client, Control: ctl}) != nil {
			return
		}
		if int(s.nameLen) != len(name) || nameLen(&s.name) != s.nameLen || nameAddrPort(&s.name) != s.client ||
			s.client.String() != netip.MustParseAddrPort(client).String() || int(s.ctlLen) != len(ctl) {
			t.Fatalf("accepted %x for %q as %s (name %d bytes, control %d)", name, client, s.client, s.nameLen, s.ctlLen)
		}
	})
}
