package proxy

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/loop"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A client's burst whose session's first datagram was just refused: the
// burst must follow the first datagram to the next backend, as each
// datagram does when it comes alone. The batch send (one GSO send, or one
// sendmmsg) reports the refusal and clears it in the kernel; it must not
// be lost there, with the burst sent to the refusing port after it.
func TestUDPBurstAfterARefusedFirstDatagramReachesTheNextBackend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int // the first datagram, then the burst
	}{
		{"equal sizes (GSO)", []int{100, 100, 100, 100}},
		{"unequal sizes (sendmmsg)", []int{100, 90, 80, 70}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dead := closedUDPPort(t)
			live := startRecorder(t)
			// Round robin puts the first session on backend 0, the dead port.
			lb := startUDPLB(t, []string{dead, live.addr()}, udpOpts{retries: 1, loops: 1})
			c := udpClient(t, lb.addr)
			var sent []string
			release := stallLoop(t, lb.server.loops[0])
			for i, n := range tc.sizes {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				if _, err := c.Write(p); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, string(p))
			}
			release()
			testnet.Eventually(t, "the refused first datagram to reach the live backend", func() bool { return live.has(sent[0]) })
			// A datagram sent after the burst on the same session: once it is
			// in, whatever of the burst went to the live backend is in too.
			if _, err := c.Write([]byte("end")); err != nil {
				t.Fatal(err)
			}
			testnet.Eventually(t, "the last datagram to reach the live backend", func() bool { return live.has("end") })
			var lost []int
			for i, p := range sent {
				if live.count(p) != 1 {
					lost = append(lost, i)
				}
			}
			if len(lost) > 0 {
				f := lb.front
				t.Errorf("datagrams %v of the client's %d never reached the live backend (it got %d of them); counted: %d to backends, drops %v",
					lost, len(sent), len(sent)-len(lost), f.DatagramsToBackend.Load(), drops(f))
			}
			if _, failed := lb.pool.Backends()[0].Dials(pool.DialClient); failed != 1 {
				t.Errorf("dead backend: %d failed dials, want 1 (the session's)", failed)
			}
		})
	}
}

// A reply already waiting in a session's socket when the backend's
// refusal of a later datagram comes in is relayed: it reached l4lb before
// anything was refused. (The kernel reports a pending socket error before
// the queued datagrams; they are still there to read after it.) While the
// first datagram is unanswered, that reply also makes the dial a success,
// not a failure, and the first datagram is not sent to another backend.
func TestUDPReplyQueuedBeforeARefusalIsRelayed(t *testing.T) {
	for _, answered := range []bool{true, false} {
		name := map[bool]string{true: "after the first reply", false: "while the first datagram is unanswered"}[answered]
		t.Run(name, func(t *testing.T) {
			srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			lb := startUDPLB(t, []string{srv.LocalAddr().String()}, udpOpts{loops: 1})
			b := lb.pool.Backends()[0]
			c := udpClient(t, lb.addr)
			c.Write([]byte("first"))
			buf := make([]byte, 100)
			srv.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, session, err := srv.ReadFromUDP(buf)
			if err != nil {
				t.Fatal(err)
			}
			if answered {
				srv.WriteToUDP([]byte("first reply"), session)
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				if n, err := c.Read(buf); err != nil || string(buf[:n]) != "first reply" {
					t.Fatalf("first reply: %q, %v", buf[:n], err)
				}
				testnet.Eventually(t, "the dial settled by the reply", func() bool { ok, _ := b.Dials(pool.DialClient); return ok == 1 })
			}
			// The loop stalled: the client's next datagram arrives, then the
			// backend's reply, then the backend goes away. The loop sends the
			// datagram (refused at once on loopback), then reads the session.
			release := stallLoop(t, lb.server.loops[0])
			c.Write([]byte("second"))
			srv.WriteToUDP([]byte("reply"), session)
			srv.Close()
			release()
			testnet.Eventually(t, "the session to end on the refusal", func() bool {
				f := lb.front
				return f.Sessions.Load() == 0
			})
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := c.Read(buf)
			if err != nil || string(buf[:n]) != "reply" {
				t.Errorf("client got %q, %v; want the backend's reply, which reached l4lb before the refusal (drops %v, ended refused %d)",
					buf[:max(n, 0)], err, drops(lb.front), lb.front.Ended[loop.EndRefused].Load())
			}
			if ok, failed := b.Dials(pool.DialClient); ok != 1 || failed != 0 {
				t.Errorf("the backend's one dial counted %d ok, %d failed; it answered, so 1 ok", ok, failed)
			}
		})
	}
}

// lateDuplicate is a backend that answers every datagram twice, the
// second time late: just before its answer to the next datagram from the
// same source port (as a slow second reply would arrive).
func lateDuplicate(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		owed := map[string][]byte{}
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if late, ok := owed[from.String()]; ok {
				c.WriteToUDP(late, from)
			}
			c.WriteToUDP(buf[:n], from)
			owed[from.String()] = append([]byte(nil), buf[:n]...)
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return c.LocalAddr().String()
}

// A backend's late extra reply to one client must not reach the next: with
// the default reuse_sockets = false every session has a socket of its own.
// (With reuse_sockets a socket handed on before such a reply came would
// relay it to the next client: that is why reuse is the operator's
// choice, for backends that answer exactly `responses` times.)
func TestUDPLateExtraReplyIsNeverRelayedToAnotherClient(t *testing.T) {
	lb := startUDPLB(t, []string{lateDuplicate(t)}, udpOpts{responses: 1, loops: 1})
	for i := range 2 {
		c := udpClient(t, lb.addr)
		want := fmt.Sprintf("client %d", i)
		got, err := askOnce(c, []byte(want), 10*time.Second)
		if err != nil || string(got) != want {
			t.Fatalf("client %d got %q, %v; want its own reply %q", i, got, err, want)
		}
		testnet.Eventually(t, "the session to end at its reply", func() bool { return lb.front.Sessions.Load() == 0 })
	}
}

// A first datagram l4lb could not send (here: 65,520 bytes from an IPv6
// client, more than a datagram to an IPv4 backend can hold, EMSGSIZE) is
// local trouble, counted as backend_send: it must not be judged later as
// the backend's silence (a failed dial with count_no_reply).
func TestUDPFirstDatagramNotSentIsNoEvidenceAgainstTheBackend(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	} else {
		c.Close()
	}
	b0 := testnet.StartUDPBackend(t, "b0", "")
	b1 := testnet.StartUDPBackend(t, "b1", "")
	b0.Silent.Store(true)
	b1.Silent.Store(true)
	lb := startUDPLB(t, []string{b0.Addr, b1.Addr}, udpOpts{bind: "[::1]:0", loops: 1,
		countNoReply: true, replyTimeout: 200 * time.Millisecond})
	// Round robin: this session goes to b0, whose socket cannot take it.
	udpClient(t, lb.addr).Write(make([]byte, 65520))
	testnet.Eventually(t, "the datagram dropped as backend_send", func() bool {
		return lb.front.Drops[loop.DropBackendSend].Load() == 1
	})
	// The next session goes to b1 and is judged on silence later than the
	// first would be: once b1's is counted, the first one's timer has run
	// (one loop, one heap, deadlines in order).
	udpClient(t, lb.addr).Write([]byte("x"))
	be := lb.pool.Backends()
	testnet.Eventually(t, "the second session's silence counted", func() bool { _, f := be[1].Dials(pool.DialClient); return f == 1 })
	if _, failed := be[0].Dials(pool.DialClient); failed != 0 || b0.Received() != 0 {
		t.Errorf("b0 received %d datagrams and was counted %d failed dials; l4lb never sent it anything", b0.Received(), failed)
	}
}

// At max_sessions, a parked socket is idle room: "the first to go when a
// new client needs room". A new client whose datagrams reach another loop
// than the one holding the parked socket must not lose its datagram to
// session_cap while that room sits unused. (max_sessions = 1 and one
// client at a time: without parking, every client gets the one socket.)
// Which loop a client reaches is the kernel's hash of its port, so 20
// clients reach both loops but with a chance of 2^-19.
func TestUDPParkedSocketOnAnotherLoopDoesNotCostANewClientItsDatagram(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{responses: 1, maxSessions: 1, loops: 2, reuseSockets: true})
	f := lb.front
	buf := make([]byte, 100)
	for i := range 20 {
		c := udpClient(t, lb.addr)
		before := taken(f)
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		testnet.Eventually(t, "the datagram taken in", func() bool { return taken(f) > before })
		if n := f.Drops[loop.DropSessionCap].Load(); n > 0 {
			t.Fatalf("client %d: its first datagram dropped at max_sessions = 1 while the one socket was parked (now: sessions %d, parked %d)",
				i, f.Sessions.Load(), f.Parked.Load())
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if n, err := c.Read(buf); err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("client %d: reply %v, %v", i, buf[:max(n, 0)], err)
		}
		testnet.Eventually(t, "the session to end and park its socket", func() bool { return f.Sessions.Load() == 0 && f.Parked.Load() == 1 })
	}
}
