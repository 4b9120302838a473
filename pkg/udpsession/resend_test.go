package udpsession

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// windowRig is a rig whose first backend (quiet) takes datagrams without
// answering, so a new session's dial stays open while its client sends
// more, until the test closes it and draws its refusal; the next
// candidates are the backends after it (round robin: a client's first
// session dials quiet first).
type windowRig struct {
	*udpRig
	quiet  *testnet.UDPBackend
	live   *testnet.UDPBackend
	c      *net.UDPConn
	client netip.AddrPort
}

// newWindowRig starts quiet, the backends between (addresses), and a
// live echo backend last, the pool trying each once.
func newWindowRig(t *testing.T, between ...string) *windowRig {
	t.Helper()
	w := &windowRig{quiet: testnet.StartUDPBackend(t, "quiet", ""), live: testnet.StartUDPBackend(t, "live", "")}
	w.quiet.Silent.Store(true)
	backends := append(append([]string{w.quiet.Addr}, between...), w.live.Addr)
	w.udpRig = newUDPRig(t, backends, udpRigOpts{retries: len(backends) - 1})
	w.c = w.udpRig.client()
	w.client = w.c.LocalAddr().(*net.UDPAddr).AddrPort()
	return w
}

// flight sends ps back to back and waits until quiet has them all: each
// went to the first backend while the session's dial was open.
func (w *windowRig) flight(ps [][]byte) {
	w.t.Helper()
	for _, p := range ps {
		if _, err := w.c.Write(p); err != nil {
			w.t.Fatal(err)
		}
	}
	testnet.Eventually(w.t, "the client's flight to reach the first backend", func() bool {
		return w.quiet.Received() == int64(len(ps))
	})
}

// refuse closes quiet and draws its refusal on the session's socket,
// while the dial is still open. From a backend across a network the ICMP
// comes back after the client's flight has left; from one on loopback it
// would come back before the next send returns, so a datagram sent on
// the session's socket to the closed port draws it here, outside every
// count. The loop acts on it when it next waits.
func (w *windowRig) refuse() {
	w.t.Helper()
	w.quiet.Close()
	var err error
	w.on(w.loops[0], func() {
		s := w.loops[0].udps[0].sessions[w.client]
		if s == nil || s.dial == nil || s.backend != w.pool.Backends()[0] {
			err = errors.New("the client's session is not dialing the first backend")
			return
		}
		if err = sendDatagram(s.fd, []byte("probe")); err == nil {
			err = awaitRefusal(s.fd)
		}
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// echoed checks that the client gets want back from the live backend,
// in order and byte for byte, and nothing more before an echo of a
// datagram sent after them: the live backend was sent each once.
func (w *windowRig) echoed(want [][]byte) {
	w.t.Helper()
	after := []byte("after")
	buf := make([]byte, 1<<16)
	for i, p := range append(want[:len(want):len(want)], after) {
		if i == len(want) {
			if _, err := w.c.Write(after); err != nil {
				w.t.Fatal(err)
			}
		}
		w.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := w.c.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], p) {
			w.t.Fatalf("echo %d: %d bytes %.12q..., %v; want %d bytes %.12q...: the live backend must get every kept datagram once, in order",
				i, n, buf[:max(n, 0)], err, len(p), p)
		}
	}
	if n := w.live.Received(); n != int64(len(want)+1) {
		w.t.Errorf("the live backend received %d datagrams, want %d", n, len(want)+1)
	}
}

// counted checks the listener's and the backends' counts once the loop
// has flushed them: the listener counts each client datagram once (sent
// is what the client sent, after included), the live backend the bytes
// of what reached it (delivered), and each datagram dropped counted
// refused.
func (w *windowRig) counted(sent, delivered [][]byte, refused int64) {
	w.t.Helper()
	w.on(w.loops[0], func() {}) // the turn that relayed the last datagram has flushed its counts
	size := func(ps [][]byte) (n int64) {
		for _, p := range ps {
			n += int64(len(p))
		}
		return n
	}
	after := int64(len("after"))
	if n := w.front.DatagramsToBackend.Load(); n != int64(len(sent))+1 {
		w.t.Errorf("the listener counts %d datagrams to backends, want %d: one per client datagram", n, len(sent)+1)
	}
	if n, want := w.front.BytesToBackend.Load(), size(sent)+after; n != want {
		w.t.Errorf("the listener counts %d bytes to backends, want %d", n, want)
	}
	if n, want := w.pool.Backends()[0].Meter.ToBackend.Load(), size(sent); n != want {
		w.t.Errorf("the first backend counts %d bytes sent it, want %d: the whole flight went there", n, want)
	}
	if n, want := w.live.Received(), int64(len(delivered))+1; n != want {
		w.t.Errorf("the live backend received %d datagrams, want %d", n, want)
	}
	live := w.pool.Backends()[len(w.pool.Backends())-1]
	if n, want := live.Meter.ToBackend.Load(), size(delivered)+after; n != want {
		w.t.Errorf("the live backend counts %d bytes sent it, want %d", n, want)
	}
	for why := range w.front.Drops {
		want := int64(0)
		if DropReason(why) == DropRefused {
			want = refused
		}
		if n := w.front.Drops[why].Load(); n != want {
			w.t.Errorf("%d datagrams counted dropped (%s), want %d", n, DropReason(why), want)
		}
	}
	if _, failed := w.pool.Backends()[0].Dials(pool.DialClient); failed != 1 {
		w.t.Errorf("the first backend has %d failed dials, want 1", failed)
	}
	if n := w.front.Ended[EndRefused].Load() + w.front.Ended[EndError].Load(); n != 0 {
		w.t.Errorf("%d sessions ended refused or in error; the session belongs on the live backend", n)
	}
}

// flightOf is n datagrams of size bytes each, each distinct.
func flightOf(n, size int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
		copy(ps[i], fmt.Sprintf("%02d:", i))
	}
	return ps
}

// A client's opening flight (a QUIC Initial flight, a burst) sent before
// its first backend's refusal comes back is not lost with the first
// backend: every datagram of it goes to the next candidate, in order,
// each still one datagram for the listener.
func TestUDPFlightSentWhileDialingFollowsTheRefusal(t *testing.T) {
	w := newWindowRig(t)
	ps := flightOf(3, 1200) // equal sizes: after the first, a burst may go as one GSO send
	w.flight(ps)
	w.refuse()
	w.echoed(ps)
	w.counted(ps, ps, 0)
}

// Past what a dialing session keeps (keepDatagrams, keepBytes), a
// datagram sent to the refusing backend is lost: the kept ones still
// reach the next candidate in order, and each lost one is counted
// dropped (refused).
func TestUDPFlightPastTheKeptBoundIsCountedDropped(t *testing.T) {
	big := flightOf(4, 7000) // the third passes keepBytes; the small last one still fits
	big[3] = big[3][:100]
	for _, tc := range []struct {
		name      string
		sent      [][]byte
		delivered [][]byte
	}{
		{"datagrams", flightOf(keepDatagrams+3, 100), flightOf(keepDatagrams, 100)},
		{"bytes", big, [][]byte{big[0], big[1], big[3]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWindowRig(t)
			w.flight(tc.sent)
			w.refuse()
			w.echoed(tc.delivered)
			w.counted(tc.sent, tc.delivered, int64(len(tc.sent)-len(tc.delivered)))
		})
	}
}

// When the next candidate refuses the re-sent flight too (its refusal
// reported to a later re-send, or read after them), the flight goes on
// to the one after, whole and in order, and neither refusal loses a
// datagram.
func TestUDPFlightRefusedTwiceReachesTheThirdBackend(t *testing.T) {
	w := newWindowRig(t, refusingAddr(t))
	ps := flightOf(3, 200)
	w.flight(ps)
	w.refuse()
	w.echoed(ps)
	w.counted(ps, ps, 0)
	refusing := w.pool.Backends()[1]
	if _, failed := refusing.Dials(pool.DialClient); failed != 1 {
		t.Errorf("the refusing backend has %d failed dials, want 1: the flight was to be re-sent there first", failed)
	}
	// It was sent a prefix of the flight: up to the re-send its refusal
	// was reported to.
	got, prefix := refusing.Meter.ToBackend.Load(), int64(0)
	for _, p := range ps {
		if prefix += int64(len(p)); got == prefix {
			return
		}
	}
	t.Errorf("the refusing backend counts %d bytes sent it: no prefix of the %d-datagram flight", got, len(ps))
}

// Three datagrams back to back to a new session whose first backend is a
// closed port: its refusal comes back during the first send on loopback,
// the next send reports it, and each datagram reaches the live backend
// once, in order, counted once by the listener.
func TestUDPBackToBackDatagramsToARefusingBackendAllArrive(t *testing.T) {
	rr := newRefusalRig(t)
	sent := []string{"one", "two", "three"}
	for _, p := range sent {
		if _, err := rr.c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	rr.echoedOnce(sent...)
	rr.on(rr.loops[0], func() {}) // the turn that relayed the last datagram has flushed its counts
	if n := rr.front.DatagramsToBackend.Load(); n != 4 {
		t.Errorf("the listener counts %d datagrams to backends, want 4: one, two, three, after", n)
	}
	for why := range rr.front.Drops {
		if n := rr.front.Drops[why].Load(); n != 0 {
			t.Errorf("%d datagrams counted dropped (%s)", n, DropReason(why))
		}
	}
}

// A session handed over while its dial is open arrives without the
// datagrams its old process kept (the record does not carry them): when
// its backend then refuses, nothing is re-sent, and every datagram the
// session sent there unanswered, in either process, is counted dropped
// (refused), by the new process, the one that learns they are lost.
func TestUDPHandedOverDialRefusedCountsItsDatagramsDropped(t *testing.T) {
	be := rawBackend(t)
	backends := []string{be.LocalAddr().String()}
	slow := udpRigOpts{pool: func(p *config.Pool) { p.ReplyTimeout = time.Minute }}
	old := newUDPRig(t, backends, slow)
	c := old.client()
	for _, p := range []string{"q", "r", "s"} {
		send(t, c, p)
		if got, _ := receive(t, be); got != p {
			t.Fatalf("the backend got %q, want %q", got, p)
		}
	}
	nw := takeOver(t, old, backends, slow)
	b := detach(t, old)
	if len(b.Sessions) != 1 || b.Sessions[0].Verdict == nil || b.Sessions[0].Requests != 3 {
		t.Fatalf("detached %+v, want one session dialing, with its 3 datagrams", b.Sessions)
	}
	goAll(nw, adopt(t, nw, transit(t, b)))
	be.Close() // its port refuses from now
	send(t, c, "t")
	testnet.Eventually(t, "the backend's refusal to end the session", func() bool {
		return nw.front.Ended[EndRefused].Load() == 1
	})
	if n := nw.front.Drops[DropRefused].Load(); n != 4 {
		t.Errorf("the new process counts %d datagrams dropped as refused, want 4: q, r, s (sent by the old one) and t", n)
	}
	if n := old.front.Drops[DropRefused].Load(); n != 0 {
		t.Errorf("the old process counts %d datagrams dropped as refused: nothing was known lost there", n)
	}
	if _, failed := nw.pool.Backends()[0].Dials(pool.DialClient); failed != 1 {
		t.Errorf("the backend has %d failed dials on the new side, want the handed-over one", failed)
	}
}
