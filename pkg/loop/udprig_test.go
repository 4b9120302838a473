package loop

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"

	"golang.org/x/sys/unix"
)

// udpRig is one UDP listener on its own loops, as pkg/proxy wires it.
type udpRig struct {
	t     *testing.T
	loops []*Loop
	front *UDPFront
	pool  *pool.Pool
	addr  string
}

type udpRigOpts struct {
	bind     string // "": 127.0.0.1:0
	loops    int    // 0: one
	retries  int
	settings func(*UDPSettings) // changes the listener's settings last
}

func newUDPRig(t *testing.T, backends []string, o udpRigOpts) *udpRig {
	t.Helper()
	testnet.CheckLeaks(t)
	if o.loops <= 0 {
		o.loops = 1
	}
	pc := config.DefaultPool("u")
	pc.Protocol = config.ProtocolUDP
	pc.Algorithm = config.AlgorithmRoundRobin
	pc.Retries = o.retries
	pc.Health.Enabled = false
	pc.Breaker.Failures = 1_000_000 // these tests are about the loop, not the breaker
	for _, a := range backends {
		b := config.DefaultBackend()
		b.Addr = a
		pc.Backends = append(pc.Backends, b)
	}
	r := &udpRig{t: t}
	// A drain's deadline cuts through the loops, as cmd/l4lb wires it.
	cut := func(b *pool.Backend) {
		for _, l := range r.loops {
			l.CutBackend(b)
		}
	}
	p, err := pool.New(pc, pool.Deps{Store: breaker.NewMemoryStore(nil), CutBackend: cut})
	if err != nil {
		t.Fatal(err)
	}
	set := UDPSettings{Pool: p, SessionTimeout: time.Minute, MaxSessions: 1000}
	if o.settings != nil {
		o.settings(&set)
	}
	f := NewUDPFront("u", set)
	if o.bind == "" {
		o.bind = "127.0.0.1:0"
	}
	socks, err := listener.BindUDP("u", o.bind, o.loops)
	if err != nil {
		t.Fatal(err)
	}
	sh := NewShared(1000, nil, slog.New(slog.DiscardHandler))
	r.front, r.pool, r.addr = f, p, socks.Addr.String()
	local := socks.Addr.AddrPort()
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	sh.ListenOn(local.Port())
	started := false
	t.Cleanup(func() {
		socks.Close() // what no loop took
		for _, l := range r.loops {
			if started {
				l.Stop()
				l.Wait()
			} else {
				l.Discard()
			}
		}
		if !started {
			return
		}
		if n := f.Sessions.Load(); n != 0 {
			t.Errorf("%d sessions counted open after the loops stopped", n)
		}
		if n := f.sockets.Load(); n != 0 {
			t.Errorf("%d backend sockets counted after the loops stopped", n)
		}
		for _, b := range p.Backends() {
			if n := b.Active(); n != 0 {
				t.Errorf("backend %s still counts %d sessions after the loops stopped", b.Addr, n)
			}
		}
	})
	for i := range o.loops {
		l, err := New(i, sh)
		if err != nil {
			t.Fatal(err)
		}
		r.loops = append(r.loops, l)
		if err := l.AddUDPListener(socks.FDs[i], f, local, socks.Wildcard); err != nil {
			t.Fatal(err)
		}
		socks.FDs[i] = -1 // the loop owns it now
	}
	f.Publish()
	for _, l := range r.loops {
		l.Start()
	}
	started = true
	return r
}

// client is one client socket (one source port) of the rig's listener.
func (r *udpRig) client() *net.UDPConn {
	r.t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(r.addr)))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

// on runs f on loop l and waits for it.
func (r *udpRig) on(l *Loop, f func()) {
	r.t.Helper()
	if !l.Do(f) {
		r.t.Fatal("the loop stopped")
	}
}

// replyWithin sends p once and returns the one reply, or an error.
func replyWithin(c *net.UDPConn, p []byte, wait time.Duration) ([]byte, error) {
	if _, err := c.Write(p); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<16)
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// refusingAddr is a port on 127.0.0.1 nothing listens on: datagrams to it
// draw ICMP port unreachable.
func refusingAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	return addr
}

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
		settings: func(s *UDPSettings) { s.Requests = 2 }})
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

// An operator's drain that reaches its deadline ends the UDP sessions
// still on the backend, as it resets TCP relays: the client's next
// datagram is re-picked, and the backend is left with nothing.
func TestUDPDrainDeadlineMovesSessionsOff(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	r := newUDPRig(t, []string{a.Addr, b.Addr}, udpRigOpts{})
	c := r.client()
	first, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var drained *pool.Backend
	for _, be := range r.pool.Backends() {
		if (string(first) == "a") == (be.Addr == a.Addr) {
			drained = be
		}
	}
	if err := r.pool.Drain(context.Background(), drained, 0); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the drained backend's sessions to end at the deadline", func() bool { return drained.Active() == 0 })
	got, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil || string(got) == string(first) {
		t.Fatalf("after the drain's deadline the client still reaches %q (%q, %v)", first, got, err)
	}
	if n := r.front.Ended[EndMoved].Load(); n != 1 {
		t.Errorf("%d sessions ended as moved, want the drained one", n)
	}
}

// A path MTU report (ICMP fragmentation needed) about one datagram a
// session sent is no failure of the session: the datagram is lost and
// counted, and the session stays with its backend.
func TestUDPPathMTUReportKeepsTheSession(t *testing.T) {
	raw, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err != nil {
		t.Skipf("no raw ICMP socket to report with: %v", err)
	}
	defer unix.Close(raw)
	// Own loopback addresses, so the path MTU the report leaves behind
	// (65535, no limit in practice) touches no other test's route.
	a := testnet.StartUDPBackend(t, "a", "127.0.0.2:0")
	b := testnet.StartUDPBackend(t, "b", "127.0.0.3:0")
	r := newUDPRig(t, []string{a.Addr, b.Addr}, udpRigOpts{})
	c := r.client()
	first, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	client := c.LocalAddr().(*net.UDPAddr).AddrPort()
	var local, backend netip.AddrPort
	l := r.loops[0]
	r.on(l, func() {
		s := l.udps[0].sessions[client]
		if s == nil {
			return
		}
		local, _ = getsockname(s.fd)
		backend = s.backend.AddrPort
	})
	if !local.IsValid() {
		t.Fatal("no session for the client")
	}
	sendFragNeeded(t, raw, local, backend, 65535)
	testnet.Eventually(t, "the loop to take the report", func() bool {
		return r.front.Drops[DropBackendSend].Load()+r.front.Ended[EndError].Load() > 0
	})
	if n := r.front.Ended[EndError].Load(); n != 0 {
		t.Fatalf("the session ended (error) on a path MTU report")
	}
	got, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil || string(got) != string(first) {
		t.Fatalf("after the report: %q, %v; want the session's backend %q", got, err, first)
	}
	if n := r.front.Started.Load(); n != 1 {
		t.Errorf("%d sessions started, want the one", n)
	}
}

// sendFragNeeded sends, from raw, the ICMP "fragmentation needed" a router
// would send about a datagram from local to remote.
func sendFragNeeded(t *testing.T, raw int, local, remote netip.AddrPort, mtu uint16) {
	t.Helper()
	msg := make([]byte, 8+20+8)
	msg[0], msg[1] = 3, 4 // destination unreachable, fragmentation needed
	binary.BigEndian.PutUint16(msg[6:], mtu)
	ip := msg[8:28]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 1400)
	ip[6] = 0x40 // DF
	ip[8], ip[9] = 64, unix.IPPROTO_UDP
	l4, r4 := local.Addr().As4(), remote.Addr().As4()
	copy(ip[12:], l4[:])
	copy(ip[16:], r4[:])
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	udp := msg[28:]
	binary.BigEndian.PutUint16(udp[0:], local.Port())
	binary.BigEndian.PutUint16(udp[2:], remote.Port())
	binary.BigEndian.PutUint16(udp[4:], 1380)
	binary.BigEndian.PutUint16(msg[2:], inetChecksum(msg))
	if err := unix.Sendto(raw, msg, 0, &unix.SockaddrInet4{Addr: l4}); err != nil {
		t.Fatalf("sending the ICMP report: %v", err)
	}
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// A reload that shortens session_timeout applies to the sessions already
// idle: they end by the new timeout, not by the old one.
func TestUDPShorterSessionTimeoutAppliesToIdleSessions(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	r := newUDPRig(t, []string{a.Addr}, udpRigOpts{loops: 2,
		settings: func(s *UDPSettings) { s.SessionTimeout = time.Hour }})
	c := r.client()
	if _, err := replyWithin(c, []byte("q"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	set := *r.front.Settings()
	set.SessionTimeout = 200 * time.Millisecond
	r.front.Set(set)
	testnet.Eventually(t, "the idle session to end by the new session_timeout", func() bool {
		return r.front.Ended[EndTimeout].Load() == 1 && r.front.Sessions.Load() == 0
	})
}

// A reload that turns reuse_sockets off stops the reuse at once: a socket
// parked before it is not handed to the next session.
func TestUDPReuseTurnedOffHandsOutNoParkedSocket(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	r := newUDPRig(t, []string{a.Addr}, udpRigOpts{
		settings: func(s *UDPSettings) { s.Responses, s.ReuseSockets = 1, true }})
	if _, err := replyWithin(r.client(), []byte("q"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the session's socket to be parked", func() bool { return r.front.Parked.Load() == 1 })
	set := *r.front.Settings()
	set.ReuseSockets = false
	r.front.Set(set)
	if _, err := replyWithin(r.client(), []byte("q"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := a.Sources(); n != 2 {
		t.Fatalf("the backend saw %d source ports for two sessions: a socket parked before reuse_sockets went off was reused", n)
	}
}
