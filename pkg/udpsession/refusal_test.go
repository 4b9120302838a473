package udpsession

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// An empty datagram is a datagram: when the backend a new session picked
// refuses it, it goes to the next candidate as any other first datagram
// does, and is not lost.
func TestUDPEmptyFirstDatagramRefusedGoesToTheNextBackend(t *testing.T) {
	live := testnet.StartUDPBackend(t, "live", "")
	r := newUDPRig(t, []string{refusingAddr(t), live.Addr}, udpRigOpts{retries: 1})
	// Round robin sends every other new session to the refusing port
	// first; each client sends its empty datagram once.
	for i := range 6 {
		c := r.client()
		got, err := replyWithin(c, nil, 20*time.Second)
		if err != nil || len(got) != 0 {
			t.Fatalf("client %d: reply %q, %v: an empty first datagram refused by one backend must reach the next", i, got, err)
		}
	}
	if n := r.front.Drops[DropRefused].Load(); n != 0 {
		t.Errorf("%d datagrams counted dropped as refused; every one was retried", n)
	}
}

// A first datagram sent again to the next candidate after a refusal is
// still one client datagram: with requests = 2 the client's second
// datagram belongs to the same session.
func TestUDPRetriedFirstDatagramCountsOnceTowardRequests(t *testing.T) {
	live := testnet.StartUDPBackend(t, "live", "")
	r := newUDPRig(t, []string{refusingAddr(t), live.Addr}, udpRigOpts{retries: 1,
		settings: func(s *Settings) { s.Requests = 2 }})
	for i := range 4 { // at least one starts on the refusing port
		c := r.client()
		before := r.front.Started.Load()
		for _, p := range []string{"one", "two"} {
			got, err := replyWithin(c, []byte(p), 20*time.Second)
			if err != nil || string(got) != p {
				t.Fatalf("client %d, %q: reply %q, %v", i, p, got, err)
			}
		}
		if n := r.front.Started.Load() - before; n != 1 {
			t.Fatalf("client %d: two datagrams started %d sessions; requests = 2 retires a session after two", i, n)
		}
	}
	if got := r.pool.Backends()[0].Active() + r.pool.Backends()[1].Active(); got != 4 {
		t.Errorf("%d sessions on the backends, want 4", got)
	}
}

// nameOf is the socket address the kernel writes for an IPv4 client.
func nameOf(ap netip.AddrPort) sockName {
	var n sockName
	p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&n))
	p.Family = unix.AF_INET
	p.Port = rawsys.Ntohs(ap.Port()) // its own inverse
	p.Addr = ap.Addr().As4()
	return n
}

// A refusal read while an earlier one of the same readReplies call waits
// (behind the datagrams queued ahead of it) is about the same backend:
// the session moves on once, and the next backend is not blamed for the
// first backend's refusal.
//
// The second refusal must land between two recvmmsg calls of one
// readReplies: a window of microseconds no test can aim for. So the
// state the first call leaves (s.refused set) is made by hand, and the
// second refusal is the kernel's own, pending on the socket.
func TestUDPSecondRefusalInOneReadBlamesTheFirstBackend(t *testing.T) {
	rr := newRefusalRig(t)
	r, c, client, name := rr.udpRig, rr.c, rr.client, rr.name
	l := r.loops[0]
	var setupErr error
	r.on(l, func() {
		u := l.udps[0]
		u.datagram([]byte("q"), &name, nil) // round robin: the refusing backend first
		s := u.sessions[client]
		if s == nil || s.dial == nil || s.backend != r.pool.Backends()[0] {
			setupErr = errors.New("the first session is not dialing the refusing backend")
			return
		}
		// Its refusal (ICMP port unreachable) is pending on the socket.
		if setupErr = awaitRefusal(s.fd); setupErr != nil {
			return
		}
		s.refused = unix.ECONNREFUSED // read earlier in this call, acted on at its end
		s.readReplies()
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	if _, failed := r.pool.Backends()[1].Dials(pool.DialClient); failed != 0 {
		t.Errorf("the live backend was blamed for %d failed dials: the refusals were the first backend's", failed)
	}
	if _, failed := r.pool.Backends()[0].Dials(pool.DialClient); failed != 1 {
		t.Errorf("the refusing backend has %d failed dials, want 1", failed)
	}
	if n := r.front.Ended[EndRefused].Load() + r.front.Ended[EndError].Load(); n != 0 {
		t.Errorf("%d sessions ended refused or in error; the session belongs on the live backend", n)
	}
	if n := r.front.Drops[DropRefused].Load(); n != 0 {
		t.Errorf("%d datagrams dropped as refused", n)
	}
	if t.Failed() {
		return
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "q" {
		t.Fatalf("reply %q, %v: the first datagram must reach the live backend and its reply the client", buf[:n], err)
	}
}

// refusalRig is a rig whose pool is a refusing port then a live backend
// (round robin: a client's first session dials the refusing one), with
// one client, its address and socket name as the listener sees them.
type refusalRig struct {
	*udpRig
	live   *testnet.UDPBackend
	c      *net.UDPConn
	client netip.AddrPort
	name   sockName
}

func newRefusalRig(t *testing.T) *refusalRig {
	t.Helper()
	live := testnet.StartUDPBackend(t, "live", "")
	rr := &refusalRig{udpRig: newUDPRig(t, []string{refusingAddr(t), live.Addr}, udpRigOpts{retries: 1}), live: live}
	rr.c = rr.udpRig.client()
	rr.client = rr.c.LocalAddr().(*net.UDPAddr).AddrPort()
	rr.name = nameOf(rr.client)
	return rr
}

// echoedOnce checks that the live backend was sent each of sent once, in
// that order: it echoes in order, so a datagram sent it twice would be
// answered before the one the client sends after them.
func (rr *refusalRig) echoedOnce(sent ...string) {
	t := rr.t
	t.Helper()
	buf := make([]byte, 64)
	for i, want := range append(sent[:len(sent):len(sent)], "after") {
		if i == len(sent) {
			if _, err := rr.c.Write([]byte(want)); err != nil {
				t.Fatal(err)
			}
		}
		rr.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := rr.c.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("reply %q, %v, want %q: the live backend must get each datagram once, in order", buf[:max(n, 0)], err, want)
		}
	}
	if n := rr.live.Received(); n != int64(len(sent)+1) {
		t.Errorf("the live backend received %d datagrams, want %d", n, len(sent)+1)
	}
}

// awaitRefusal waits until a refusal (the kernel's report of an ICMP
// port unreachable) is pending on fd, unread.
func awaitRefusal(fd int) error {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if n, err := unix.Poll(fds, 0); err == nil && n == 1 && fds[0].Revents&unix.POLLERR != 0 {
			return nil
		}
	}
	return errors.New("no refusal reported on the session's socket")
}

// A burst to a session whose backend has gone: the first datagram draws
// the refusal (on loopback, before its send returns), and the send of the
// next one reports it. A batch send (sendmmsg) that sent only the first
// would swallow that refusal, and the rest of the burst would go to the
// dead port after it; instead the session ends (refused) and the datagram
// being sent gets one more try on a new session, on the other backend.
func TestUDPRefusalDuringABurstSendIsNotLost(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	r := newUDPRig(t, []string{a.Addr, b.Addr}, udpRigOpts{})
	c := r.client()
	got, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	map[string]*testnet.UDPBackend{"a": a, "b": b}[string(got)].Close() // the session's backend goes away
	l := r.loops[0]
	var sendErr error
	r.on(l, func() {
		// A burst of unequal sizes (no GSO), queued before the loop reads
		// it: one recvmmsg takes both.
		u := l.udps[0]
		for _, p := range []string{"x", "yy"} {
			before, err := rmemAlloc(u.fd)
			if err != nil {
				sendErr = err
				return
			}
			if _, err := c.Write([]byte(p)); err != nil {
				sendErr = err
				return
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
				if now, err := rmemAlloc(u.fd); err != nil || now > before {
					sendErr = err
					break
				}
				if time.Now().After(deadline) {
					sendErr = errors.New("the client's datagram never reached the listener")
					return
				}
			}
		}
	})
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "yy" {
		t.Fatalf("reply %q, %v: the datagram whose send found the refusal must get its retry on the live backend; drops: refused %d, backend_send %d",
			buf[:n], err, r.front.Drops[DropRefused].Load(), r.front.Drops[DropBackendSend].Load())
	}
	if n := r.front.Ended[EndRefused].Load(); n != 1 {
		t.Errorf("%d sessions ended refused, want the one on the closed backend", n)
	}
	if n := r.front.Drops[DropRefused].Load(); n != 1 {
		t.Errorf("%d datagrams dropped as refused, want the one the refusal was about", n)
	}
}

// A first datagram refused by one backend and sent again to the next is
// one datagram the client sent the listener, and one datagram each
// backend was sent: the listener's counters count it once, the refusing
// backend's bytes once per refusal, the live backend's once per client.
func TestUDPRetriedFirstDatagramCountsOnceForTheListener(t *testing.T) {
	live := testnet.StartUDPBackend(t, "live", "")
	r := newUDPRig(t, []string{refusingAddr(t), live.Addr}, udpRigOpts{retries: 1})
	const clients, query = 4, "query" // round robin: at least one starts on the refusing port
	for i := range clients {
		if got, err := replyWithin(r.client(), []byte(query), 20*time.Second); err != nil || string(got) != query {
			t.Fatalf("client %d: reply %q, %v", i, got, err)
		}
	}
	r.on(r.loops[0], func() {}) // the turn that relayed the last reply has flushed its counts
	refusing, alive := r.pool.Backends()[0], r.pool.Backends()[1]
	_, refusals := refusing.Dials(pool.DialClient)
	if refusals == 0 {
		t.Fatal("no session started on the refusing backend: nothing was re-sent")
	}
	if n := r.front.DatagramsToBackend.Load(); n != clients {
		t.Errorf("the listener counts %d datagrams to backends, want %d: one per client datagram, a re-sent one too", n, clients)
	}
	if n := r.front.BytesToBackend.Load(); n != clients*int64(len(query)) {
		t.Errorf("the listener counts %d bytes to backends, want %d", n, clients*len(query))
	}
	if n := alive.Meter.ToBackend.Load(); n != clients*int64(len(query)) {
		t.Errorf("the live backend counts %d bytes sent it, want %d: every client's datagram reached it once", n, clients*len(query))
	}
	if n := refusing.Meter.ToBackend.Load(); n != refusals*int64(len(query)) {
		t.Errorf("the refusing backend counts %d bytes sent it, want %d: one datagram per refusal", n, refusals*int64(len(query)))
	}
}

// A new session whose very first send finds a refusal already pending on
// its socket (one that landed between unpark's check and the send, or
// between the dial and the send) moves to the next candidate, which gets
// the client's datagram once: it follows the session there (the send
// that met the refusal sent nothing, so nothing was kept to re-send),
// and the datagram is counted once, for the listener and the session.
//
// Nothing aims a refusal into that window on its own, so the test seam
// beforeFirstSend draws a real one there: a datagram sent on the
// session's socket to the refusing port, its ICMP reported on the socket.
func TestUDPFirstSendMeetingARefusalReachesTheNextBackendOnce(t *testing.T) {
	rr := newRefusalRig(t)
	r, l := rr.udpRig, rr.loops[0]
	refusing, alive := r.pool.Backends()[0], r.pool.Backends()[1]
	const query = "query"
	var setupErr error
	var requests int
	var bytes int64
	r.on(l, func() {
		l.beforeFirstSend = func(s *session) {
			l.beforeFirstSend = nil // the session moving on sends to the live backend undisturbed
			if s.backend != refusing {
				setupErr = errors.New("the new session is not dialing the refusing backend")
				return
			}
			if err := sendDatagram(s.fd, []byte("before")); err != nil {
				setupErr = err
				return
			}
			setupErr = awaitRefusal(s.fd)
		}
		u := l.udps[0]
		u.datagram([]byte(query), &rr.name, nil) // round robin: the refusing backend first
		s := u.sessions[rr.client]
		if s == nil || s.backend != alive {
			setupErr = errors.Join(setupErr, errors.New("the session did not move to the live backend"))
			return
		}
		requests, bytes = s.requests, s.bytesToBackend
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	r.on(l, func() {}) // the turn that sent the query has flushed its counts
	if _, failed := refusing.Dials(pool.DialClient); failed != 1 {
		t.Errorf("the refusing backend has %d failed dials, want 1", failed)
	}
	if requests != 1 || bytes != int64(len(query)) {
		t.Errorf("the session counts %d datagrams, %d bytes to its backend, want 1, %d", requests, bytes, len(query))
	}
	if n := r.front.DatagramsToBackend.Load(); n != 1 {
		t.Errorf("the listener counts %d datagrams to backends, want 1", n)
	}
	if n := r.front.BytesToBackend.Load(); n != int64(len(query)) {
		t.Errorf("the listener counts %d bytes to backends, want %d", n, len(query))
	}
	if n := alive.Meter.ToBackend.Load(); n != int64(len(query)) {
		t.Errorf("the live backend counts %d bytes sent it, want %d", n, len(query))
	}
	for why := range r.front.Drops {
		if n := r.front.Drops[why].Load(); n != 0 {
			t.Errorf("%d datagrams counted dropped (%s): the client's one reached the live backend", n, DropReason(why))
		}
	}
	rr.echoedOnce(query)
}

// A datagram of an open session whose send finds the refusal of the
// session's first datagram: the first goes to the next candidate, and
// this one follows it there; each reaches it once.
func TestUDPSecondDatagramMeetingTheFirstOnesRefusalFollowsIt(t *testing.T) {
	rr := newRefusalRig(t)
	r, l := rr.udpRig, rr.loops[0]
	var setupErr error
	var requests int
	r.on(l, func() {
		u := l.udps[0]
		u.datagram([]byte("one"), &rr.name, nil) // round robin: the refusing backend first
		s := u.sessions[rr.client]
		if s == nil || s.dial == nil || s.backend != r.pool.Backends()[0] {
			setupErr = errors.New("the first session is not dialing the refusing backend")
			return
		}
		if setupErr = awaitRefusal(s.fd); setupErr != nil {
			return
		}
		u.datagram([]byte("two"), &rr.name, nil) // its send reports the refusal of "one"
		if s = u.sessions[rr.client]; s == nil || s.backend != r.pool.Backends()[1] {
			setupErr = errors.New("the session did not move to the live backend")
			return
		}
		requests = s.requests
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	if requests != 2 {
		t.Errorf("the session counts %d datagrams to its backend, want 2", requests)
	}
	rr.echoedOnce("one", "two")
	r.on(l, func() {}) // the turn that relayed the last reply has flushed its counts
	if n := r.front.DatagramsToBackend.Load(); n != 3 {
		t.Errorf("the listener counts %d datagrams to backends, want 3: one, two, after", n)
	}
}
