package server

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/udpsession"
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
					buf[:max(n, 0)], err, drops(lb.front), lb.front.Ended[udpsession.EndRefused].Load())
			}
			if ok, failed := b.Dials(pool.DialClient); ok != 1 || failed != 0 {
				t.Errorf("the backend's one dial counted %d ok, %d failed; it answered, so 1 ok", ok, failed)
			}
		})
	}
}

// A refused first datagram larger than what a session keeps for a retry
// (16 KiB, udpsession's keepBytes) is dropped and counted, not retried;
// the client's own retry is a new session on the next backend.
func TestUDPLargeRefusedFirstDatagramIsCountedNotRetried(t *testing.T) {
	dead := closedUDPPort(t)
	live := startRecorder(t)
	// Round robin: the first session to backend 0 (dead), the next to 1.
	lb := startUDPLB(t, []string{dead, live.addr()}, udpOpts{retries: 1, loops: 1})
	f := lb.front
	c := udpClient(t, lb.addr)
	p := bytes.Repeat([]byte{'L'}, 20000)
	c.Write(p)
	testnet.Eventually(t, "the session to end refused", func() bool { return f.Ended[udpsession.EndRefused].Load() == 1 })
	if d := f.Drops[udpsession.DropRefused].Load(); d != 1 {
		t.Errorf("%d datagrams dropped as refused, want 1", d)
	}
	if _, failed := lb.pool.Backends()[0].Dials(pool.DialClient); failed != 1 {
		t.Errorf("dead backend: %d failed dials, want 1", failed)
	}
	echoOnce(t, c, p)
	if n := len(live.received()); n != 1 {
		t.Errorf("live backend got %d datagrams, want the client's retry only", n)
	}
}
