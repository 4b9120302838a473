package server

import (
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

func TestUDPResponsesEndTheSession(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{responses: 1})
	c := udpClient(t, lb.addr)
	for i := range 3 {
		mustEcho(t, c, []byte{byte(i)})
		testnet.Eventually(t, "the session to end after its one reply", func() bool { return lb.front.Sessions.Load() == 0 })
	}
	if got := lb.front.Ended[udpsession.EndResponses].Load(); got != 3 {
		t.Errorf("%d sessions ended by responses, want 3 (one per datagram)", got)
	}
	if got := lb.front.Started.Load(); got != 3 {
		t.Errorf("%d sessions started, want 3", got)
	}
}

func TestUDPRequestsRetireTheSession(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{requests: 2, sessionTimeout: time.Minute})
	c := udpClient(t, lb.addr)
	for i := range 6 {
		mustEcho(t, c, []byte{byte(i)}) // replies of a retired session still reach the client
	}
	if got := lb.front.Started.Load(); got != 3 {
		t.Errorf("%d sessions started for 6 datagrams with requests = 2, want 3", got)
	}
	// Retired sessions stay until they time out: their replies may still come.
	if got := lb.front.Sessions.Load(); got != 3 {
		t.Errorf("%d sessions open, want 3 (retired ones live on until session_timeout)", got)
	}
	if be.Sources() != 3 {
		t.Errorf("backend saw %d source ports, want 3 (a socket per session)", be.Sources())
	}
}

func TestUDPIdleSessionsTimeOut(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{sessionTimeout: 300 * time.Millisecond})
	for range 5 {
		mustEcho(t, udpClient(t, lb.addr), []byte("x"))
	}
	testnet.Eventually(t, "idle sessions to time out", func() bool { return lb.front.Sessions.Load() == 0 })
	if got := lb.front.Ended[udpsession.EndTimeout].Load(); got != 5 {
		t.Errorf("%d sessions ended by timeout, want 5", got)
	}
	if got := lb.pool.Backends()[0].Active(); got != 0 {
		t.Errorf("backend still counts %d sessions after they ended", got)
	}
}

func TestUDPActiveSessionOutlivesTheTimeout(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	timeout := 3 * time.Second
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{sessionTimeout: timeout})
	c := udpClient(t, lb.addr)
	start := time.Now()
	for time.Since(start) < timeout+time.Second {
		mustEcho(t, c, []byte("x"))
		time.Sleep(100 * time.Millisecond)
	}
	if got := lb.front.Started.Load(); got != 1 {
		t.Errorf("%d sessions for one client that never went idle for %v, want 1", got, timeout)
	}
}

func TestUDPMaxSessionsEvictsTheLongestIdle(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{maxSessions: 4, loops: 1})
	var cs []*net.UDPConn
	for range 6 {
		c := udpClient(t, lb.addr)
		mustEcho(t, c, []byte("x"))
		cs = append(cs, c)
	}
	if got := lb.front.Sessions.Load(); got != 4 {
		t.Fatalf("%d sessions open, want max_sessions = 4", got)
	}
	if got := lb.front.Ended[udpsession.EndEvicted].Load(); got != 2 {
		t.Fatalf("%d sessions evicted, want 2", got)
	}
	// The two newest kept their sessions; the oldest lost its own.
	for _, c := range cs[4:] {
		mustEcho(t, c, []byte("y"))
	}
	if got := lb.front.Started.Load(); got != 6 {
		t.Errorf("the newest clients got new sessions (%d started, want 6): eviction took a recent session", got)
	}
	mustEcho(t, cs[0], []byte("y"))
	if got := lb.front.Started.Load(); got != 7 {
		t.Errorf("%d sessions started, want 7: the evicted client needs a new one", got)
	}
}

func TestUDPFloodOfSourcePortsIsBoundedByMaxSessions(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	const max = 64
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{maxSessions: max})
	fdsBefore := countOpenFDs(t)
	ra, _ := net.ResolveUDPAddr("udp", lb.addr)
	const flood, batch = 2000, 100
	taken := func() int64 {
		f := lb.front
		n := f.DatagramsToBackend.Load()
		for r := range udpsession.NumDropReasons {
			if !kernelDrop(r) {
				n += f.Drops[r].Load()
			}
		}
		return n
	}
	for sent := batch; sent <= flood; sent += batch {
		// Batches small enough for the sockets' receive buffers, and each
		// taken in before the next: every datagram reaches l4lb.
		var cs []*net.UDPConn
		for range batch {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			c.WriteToUDP([]byte("flood"), ra)
			cs = append(cs, c)
		}
		testnet.Eventually(t, "the batch to be taken in", func() bool { return taken() >= int64(sent) })
		for _, c := range cs {
			c.Close()
		}
		if got := lb.front.Sessions.Load(); got > max {
			t.Fatalf("%d sessions open, above max_sessions %d", got, max)
		}
	}
	// Each new client past the cap evicted a session, or (its loop holding
	// none) was dropped while the other loop made room.
	f := lb.front
	if ev, capped := f.Ended[udpsession.EndEvicted].Load(), f.Drops[udpsession.DropSessionCap].Load(); ev+capped < flood-2*max {
		t.Errorf("%d sessions evicted and %d datagrams dropped at the cap, by %d new clients over a cap of %d", ev, capped, flood, max)
	}
	if got := lb.front.Sessions.Load(); got > max {
		t.Fatalf("%d sessions open, above max_sessions %d", got, max)
	}
	// Each session holds one socket: the process holds no more than the cap.
	if extra := countOpenFDs(t) - fdsBefore; extra > max {
		t.Errorf("%d more fds open after the flood, want at most max_sessions (%d)", extra, max)
	}
	mustEcho(t, udpClient(t, lb.addr), []byte("still serving"))
}
