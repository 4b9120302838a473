package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

func TestUDPCleanSessionsReuseTheirBackendSocket(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{responses: 1, loops: 1, reuseSockets: true})
	for i := range 20 {
		mustEcho(t, udpClient(t, lb.addr), []byte{byte(i)})
		testnet.Eventually(t, "the session to end at its reply", func() bool { return lb.front.Sessions.Load() == 0 })
	}
	if n := be.Sources(); n != 1 {
		t.Errorf("backend saw %d source ports for 20 sequential clean sessions, want 1 (the socket parked and reused)", n)
	}
	if got := lb.front.Parked.Load(); got != 1 {
		t.Errorf("%d sockets parked, want 1", got)
	}
}

func TestUDPParkedSocketsCloseAfterTheSessionTimeout(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{responses: 1, sessionTimeout: 300 * time.Millisecond, reuseSockets: true})
	mustEcho(t, udpClient(t, lb.addr), []byte("x"))
	testnet.Eventually(t, "a socket to be parked", func() bool { return lb.front.Parked.Load() == 1 })
	testnet.Eventually(t, "the parked socket to be closed", func() bool { return lb.front.Parked.Load() == 0 })
}

// doubleEcho answers every datagram twice: a backend that says more than
// the listener's responses = 1 allows. sources lists the source of every
// datagram it got, in order.
func doubleEcho(t *testing.T) (addr string, sources func() []string) {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, from.String())
			mu.Unlock()
			c.WriteToUDP(buf[:n], from)
			c.WriteToUDP(buf[:n], from)
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return c.LocalAddr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

// A reply beyond what the session was owed must never reach another
// client: by default no socket is reused, so each session has its own.
func TestUDPSocketsAreNotReusedByDefault(t *testing.T) {
	addr, sources := doubleEcho(t)
	lb := startUDPLB(t, []string{addr}, udpOpts{responses: 1, loops: 1})
	for i := range 30 {
		c := udpClient(t, lb.addr)
		want := []byte(fmt.Sprintf("client %d", i))
		got, err := askOnce(c, want, 10*time.Second)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("client %d got %q, %v; want its own reply %q", i, got, err, want)
		}
	}
	// A socket handed on would carry the next session (one loop, one
	// client after another) from the port the last one used. Distinct
	// ports over all 30 is not asked: the kernel may give a closed
	// socket's ephemeral port to a later one.
	src := sources()
	if len(src) != 30 {
		t.Fatalf("backend got %d datagrams for 30 sessions", len(src))
	}
	for i := 1; i < len(src); i++ {
		if src[i] == src[i-1] {
			t.Errorf("sessions %d and %d came from one socket (%s): sockets are not reused unless reuse_sockets is set", i-1, i, src[i])
		}
	}
	if got := lb.front.Parked.Load(); got != 0 {
		t.Errorf("%d sockets parked without reuse_sockets", got)
	}
}

func TestUDPParkedSocketsCountAgainstMaxSessions(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	be2 := testnet.StartUDPBackend(t, "b", "")
	const max = 4
	lb := startUDPLB(t, []string{be.Addr, be2.Addr}, udpOpts{responses: 1, maxSessions: max, loops: 1, reuseSockets: true})
	fds := countOpenFDs(t)
	for i := range 40 {
		mustEcho(t, udpClient(t, lb.addr), []byte{byte(i)})
		f := lb.front
		if held := f.Parked.Load() + f.Sessions.Load(); held > max {
			t.Fatalf("%d parked + %d open sessions, above max_sessions %d", f.Parked.Load(), f.Sessions.Load(), max)
		}
	}
	if extra := countOpenFDs(t) - fds; extra > max+40 { // the test's own 40 clients are open until cleanup
		t.Errorf("%d more fds after 40 sessions, want at most max_sessions (%d) for l4lb", extra-40, max)
	}
}

// A client's burst of equal-sized datagrams reaches the backend as the
// same datagrams, in order, whether or not it went as one GSO send.
func TestUDPBurstsArriveAsTheSameDatagrams(t *testing.T) {
	rec, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got [][]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<16)
		for {
			n, _, err := rec.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, append([]byte(nil), buf[:n]...))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { rec.Close(); <-done })
	lb := startUDPLB(t, []string{rec.LocalAddr().String()}, udpOpts{loops: 1})
	c := udpClient(t, lb.addr)
	var sent [][]byte
	seq := 0
	for round, size := range []int{100, 1400, 9000, 100, 1400, 100, 100, 9000} {
		// A round fits the sockets' receive buffers, and is taken in before
		// the next, so every datagram must arrive.
		count := min(20, 40000/size)
		for k := range count {
			n := size
			if k == count-1 && round%2 == 1 {
				n = size / 2 // a shorter last datagram still fits a GSO burst
			}
			p := make([]byte, n)
			binary.BigEndian.PutUint32(p, uint32(seq))
			for j := 4; j < n; j++ {
				p[j] = byte(seq + j)
			}
			seq++
			if _, err := c.Write(p); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, p)
		}
		testnet.Eventually(t, "the round to arrive", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= len(sent) })
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(sent) {
		t.Fatalf("backend got %d datagrams, the client sent %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("datagram %d: got %d bytes (seq %d), sent %d (seq %d)", i, len(got[i]),
				binary.BigEndian.Uint32(got[i]), len(sent[i]), i)
		}
	}
	t.Logf("%d datagrams, %d of the bursts went as one GSO send", len(sent), lb.front.Bursts.Load())
}

// At max_sessions, a parked socket is the first to go: a new client takes
// its place and no open session is evicted.
func TestUDPParkedSocketGoesBeforeAnOpenSessionAtMaxSessions(t *testing.T) {
	lb := startUDPLB(t, []string{answerN(t)}, udpOpts{responses: 2, maxSessions: 2, loops: 1, reuseSockets: true})
	f := lb.front
	a := udpClient(t, lb.addr)
	echoOnce(t, a, []byte("1a")) // one reply of two: a's session stays open
	b := udpClient(t, lb.addr)
	b.Write([]byte("2b")) // two replies: b's session ends clean and parks its socket
	readOne(t, b)
	readOne(t, b)
	testnet.Eventually(t, "b's socket parked", func() bool { return f.Parked.Load() == 1 && f.Sessions.Load() == 1 })
	c := udpClient(t, lb.addr)
	echoOnce(t, c, []byte("1c")) // at the cap: the parked socket makes room
	if ev, p, s := f.Ended[udpsession.EndEvicted].Load(), f.Parked.Load(), f.Sessions.Load(); ev != 0 || p != 0 || s != 2 {
		t.Fatalf("after a new client at the cap: %d evicted, %d parked, %d sessions; want 0, 0, 2", ev, p, s)
	}
	echoOnce(t, a, []byte("1a again"))
	if got := f.Started.Load(); got != 3 {
		t.Errorf("%d sessions started, want 3: a kept its session", got)
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
		if n := f.Drops[udpsession.DropSessionCap].Load(); n > 0 {
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
