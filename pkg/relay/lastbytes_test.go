package relay

// What a peer sent before its reset reaches the other side, then the
// reset, however the loop finds the reset: by a write of the other
// direction, at connect, or writing the PROXY header.

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// loopFDs returns the loop's own ends of the only connection l holds.
func (h *harness) loopFDs(l *Loop) (cl, be int) {
	h.t.Helper()
	cl, be = -1, -1
	h.on(l, func() {
		for c := range l.conns {
			cl, be = c.cl.fd, c.be.fd
		}
	})
	if cl < 0 || be < 0 {
		h.t.Fatal("no relayed connection on the loop")
	}
	return cl, be
}

// inQueue is how many bytes wait in fd's receive queue (read by the test
// while the loop is held, so the loop does not take them meanwhile).
func inQueue(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	if err != nil {
		return -1
	}
	return n
}

// tcpClosed reports whether the socket has taken its peer's reset (the
// state is read without consuming the pending error).
func tcpClosed(fd int) bool {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && info.State == 7 // TCP_CLOSE
}

// readThenReset reads c to its end and checks it got want and then a
// reset, never a clean EOF.
func readThenReset(t *testing.T, who string, c *net.TCPConn, want []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(c)
	if !bytes.Equal(got, want) || !isReset(err) {
		t.Fatalf("%s read %q then %v, want %q then a reset (ECONNRESET)", who, got, err, want)
	}
}

// A peer that sends its last bytes and resets, found broken by a write
// of the other direction: what it sent before the reset must still reach
// the other side, then the reset (a direct peer reads those bytes before
// ECONNRESET). The loop is held so the write to the broken socket comes
// before any read from it.
func TestLastBytesBeforeAResetFoundByAWriteAreRelayed(t *testing.T) {
	for _, backendResets := range []bool{true, false} {
		name := "client resets"
		if backendResets {
			name = "backend resets"
		}
		t.Run(name, func(t *testing.T) {
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
			p := h.open("p", k)
			defer p.close()
			p.ping(t)
			l := h.loops[0]
			clFD, beFD := h.loopFDs(l)
			resetter, peer := p.client, p.backend
			resetterFD, peerFD := clFD, beFD
			if backendResets {
				resetter, peer = peer, resetter
				resetterFD, peerFD = peerFD, resetterFD
			}
			release := h.hold(l)
			// The peer's bytes come first, so the loop writes them to the
			// resetter's socket (and finds it broken) before it reads it.
			peer.Write([]byte("more"))
			testnet.Eventually(t, "the peer's bytes to wait at the loop", func() bool { return inQueue(peerFD) == 4 })
			resetter.Write([]byte("bye"))
			resetter.SetLinger(0)
			resetter.Close()
			testnet.Eventually(t, "the reset to land at the loop", func() bool {
				return inQueue(resetterFD) == 3 && tcpClosed(resetterFD)
			})
			release()
			readThenReset(t, "peer of the side that reset", peer, []byte("bye"))
			testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
		})
	}
}

// A backend that accepts, says something and resets before the loop has
// looked at its connect: the client must get those bytes, then the reset,
// as it would from the backend directly. The loop is driven by hand so
// the bytes and the reset are both there when it looks.
func TestBytesBeforeAResetAtConnectAreRelayed(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	l := h.loops[0]
	dialed, resetDone, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	proceed := make(chan struct{})
	var beFD int
	l.r.Post(func() {
		<-proceed
		for _, s := range l.lsocks {
			s.acceptAll() // accept and connect(2), in this turn
		}
		for c := range l.conns {
			beFD = c.be.fd
		}
		close(dialed)
		<-resetDone
		close(finished)
	})
	c := h.dial("p")
	defer c.Close()
	close(proceed)
	<-dialed
	busyThenReset(t, k, beFD)
	close(resetDone)
	<-finished
	readThenReset(t, "client", c, []byte("busy"))
	testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
}

// The same with proxy_protocol on, the reset landing after the loop saw
// the connect complete: the PROXY header's write finds the backend
// broken, and what the backend sent before its reset still reaches the
// client. The loop is driven by hand: the connect's event is taken before
// the reset and handled after it.
func TestBytesBeforeAResetFoundByTheProxyHeaderAreRelayed(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr},
		keys: `proxy_protocol = "v1"`}}})
	l := h.loops[0]
	proceed, dialed, resetDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var beFD int
	l.r.Post(func() {
		<-proceed
		// Queued ahead of the connect's event: it runs first in the turn
		// that takes both, and holds the loop while the backend resets.
		l.r.Post(func() { <-resetDone })
		for _, s := range l.lsocks {
			s.acceptAll() // accept and connect(2), in this turn
		}
		for c := range l.conns {
			beFD = c.be.fd
		}
		close(dialed)
	})
	c := h.dial("p")
	defer c.Close()
	close(proceed)
	<-dialed
	busyThenReset(t, k, beFD)
	close(resetDone)
	readThenReset(t, "client", c, []byte("busy"))
	testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
}

// busyThenReset makes the backend the taker k accepts next send "busy" and
// reset, and waits until both have landed in the loop's socket beFD.
func busyThenReset(t *testing.T, k *testnet.Taker, beFD int) {
	t.Helper()
	b := k.Next(t)
	b.Write([]byte("busy"))
	b.SetLinger(0)
	b.Close()
	testnet.Eventually(t, "the bytes and the reset to land at the loop", func() bool {
		return inQueue(beFD) == 4 && tcpClosed(beFD)
	})
}
