package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// closedUDPPort is a port on 127.0.0.1 nothing listens on: datagrams to it
// draw ICMP port unreachable.
func closedUDPPort(t *testing.T) string { return testnet.FreeAddr(t) }

func TestUDPRefusedFirstDatagramGoesToTheNextBackend(t *testing.T) {
	dead := closedUDPPort(t)
	live := testnet.StartUDPBackend(t, "live", "")
	lb := startUDPLB(t, []string{dead, live.Addr}, udpOpts{retries: 1, failures: 3, cooldown: time.Minute})
	// Each new client is one session; round robin sends every other one to
	// the dead port first. No resend by the client: the proxy's retry of
	// the refused first datagram must deliver it.
	for i := range 12 {
		c := udpClient(t, lb.addr)
		got, err := askOnce(c, []byte("q"), 10*time.Second)
		if err != nil || string(got) != "q" {
			t.Fatalf("client %d: %q, %v: a first datagram refused by one backend must reach the next", i, got, err)
		}
	}
	b := lb.pool.Backends()[0]
	if _, failed := b.Dials(pool.DialClient); failed < 3 {
		t.Errorf("dead backend: %d failed dials, want every refusal counted (>= 3)", failed)
	}
	testnet.Eventually(t, "the dead backend's breaker to open", func() bool { return b.Breaker().Open })
	if b.Usable() {
		t.Error("dead backend still usable after its breaker opened")
	}
	if ok, _ := lb.pool.Backends()[1].Dials(pool.DialClient); ok == 0 {
		t.Error("live backend: no successful dial counted for its replies")
	}
}

func TestUDPSessionOnARefusingBackendEnds(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	other := testnet.StartUDPBackend(t, "b", "")
	lb := startUDPLB(t, []string{be.Addr, other.Addr}, udpOpts{})
	c := udpClient(t, lb.addr)
	first := who(t, c)
	victim := be
	if first == "b" {
		victim = other
	}
	victim.Close() // from now its port refuses
	// The session's next datagram is refused; the one after goes to a new
	// session (the client's own retry).
	testnet.Eventually(t, "a new session on the live backend", func() bool {
		got, err := askOnce(c, []byte("who"), 500*time.Millisecond)
		return err == nil && string(got) != first
	})
	if got := lb.front.Ended[udpsession.EndRefused].Load(); got != 1 {
		t.Errorf("%d sessions ended as refused, want 1", got)
	}
}

func TestUDPSessionMovesOffADisabledBackend(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	lb := startUDPLB(t, []string{a.Addr, b.Addr}, udpOpts{})
	c := udpClient(t, lb.addr)
	first := who(t, c)
	if again := who(t, c); again != first {
		t.Fatalf("one session reached %s then %s", first, again)
	}
	idx := 0
	if first == "b" {
		idx = 1
	}
	if err := lb.pool.Disable(context.Background(), lb.pool.Backends()[idx]); err != nil {
		t.Fatal(err)
	}
	if now := who(t, c); now == first {
		t.Fatalf("session still on disabled backend %s", first)
	}
	if got := lb.front.Ended[udpsession.EndMoved].Load(); got != 1 {
		t.Errorf("%d sessions ended as moved, want 1", got)
	}
	if got := lb.pool.Backends()[idx].Active(); got != 0 {
		t.Errorf("disabled backend still counts %d sessions", got)
	}
}

func TestUDPNoReplyIsAFailureOnlyWithCountNoReply(t *testing.T) {
	for _, count := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[count], func(t *testing.T) {
			be := testnet.StartUDPBackend(t, "a", "")
			be.Silent.Store(true)
			lb := startUDPLB(t, []string{be.Addr}, udpOpts{countNoReply: count, replyTimeout: 100 * time.Millisecond, failures: 2, cooldown: time.Minute})
			for range 2 {
				udpClient(t, lb.addr).Write([]byte("hello?"))
			}
			b := lb.pool.Backends()[0]
			testnet.Eventually(t, "both datagrams to reach the backend", func() bool { return be.Received() == 2 })
			if count {
				testnet.Eventually(t, "silence to trip the breaker", func() bool { return b.Breaker().Open })
				if _, failed := b.Dials(pool.DialClient); failed != 2 {
					t.Errorf("%d failed dials, want 2", failed)
				}
				return
			}
			// Without count_no_reply silence is no evidence.
			testnet.Eventually(t, "both first datagrams to go unanswered", func() bool { return lb.front.Unanswered.Load() == 2 })
			if ok, failed := b.Dials(pool.DialClient); ok != 0 || failed != 0 || b.Breaker().Open {
				t.Errorf("silence counted: %d ok, %d failed, open %v", ok, failed, b.Breaker().Open)
			}
		})
	}
}

// A session begun before a trip whose reply arrives after it is stale
// evidence: it must never close the breaker.
func TestUDPReplyFromBeforeATripDoesNotCloseTheBreaker(t *testing.T) {
	// The backend holds the first datagram without answering.
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.LocalAddr().(*net.UDPAddr)
	lb := startUDPLB(t, []string{addr.String()}, udpOpts{failures: 2, cooldown: time.Hour, replyTimeout: time.Hour})
	b := lb.pool.Backends()[0]
	early := udpClient(t, lb.addr)
	early.Write([]byte("early"))
	buf := make([]byte, 100)
	srv.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, session, err := srv.ReadFromUDP(buf) // the early session's socket
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // the port refuses now: new sessions fail and trip the breaker
	for i := 0; !b.Breaker().Open; i++ {
		if i > 200 {
			t.Fatal("breaker never tripped on refusals")
		}
		askOnce(udpClient(t, lb.addr), []byte("late"), 50*time.Millisecond)
	}
	gen := b.Breaker().Generation
	stale := b.StaleResults()
	// The backend is back and answers the early datagram: a success of a
	// dial that began before the trip.
	srv2, err := net.ListenUDP("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	srv2.WriteToUDP([]byte("early reply"), session)
	early.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := early.Read(buf)
	if err != nil || string(buf[:n]) != "early reply" {
		t.Fatalf("early client: %q, %v; the reply must still be relayed", buf[:n], err)
	}
	testnet.Eventually(t, "the stale success to be counted", func() bool { return b.StaleResults() > stale })
	if st := b.Breaker(); !st.Open || st.Generation != gen {
		t.Fatalf("breaker %+v after a stale success, want still open at generation %d", st, gen)
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
		return lb.front.Drops[udpsession.DropBackendSend].Load() == 1
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
