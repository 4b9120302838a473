package server

import (
	"bufio"
	"context"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
)

// inheritPools builds a TCP pool in front of tcpBackend and a UDP pool in
// front of udpBackend (either may be ""), health checks off, running until
// the test ends.
func inheritPools(t *testing.T, tcpBackend, udpBackend string) (tcp, udp *pool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	build := func(name, proto, addr string) *pool.Pool {
		pc := config.DefaultPool(name)
		pc.Protocol = proto
		pc.Health.Enabled = false
		b := config.DefaultBackend()
		b.Addr = addr
		pc.Backends = append(pc.Backends, b)
		p, err := pool.New(pc, pool.Deps{Store: breaker.NewMemoryStore(nil)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { p.Run(ctx) })
		return p
	}
	if tcpBackend != "" {
		tcp = build("t", config.ProtocolTCP, tcpBackend)
	}
	if udpBackend != "" {
		udp = build("u", config.ProtocolUDP, udpBackend)
	}
	return tcp, udp
}

func udpFrontend(p *pool.Pool, bind string, fds []int) Frontend {
	return Frontend{Name: "u", Bind: bind, Protocol: "udp", Pool: p, SessionTimeout: time.Minute, MaxSessions: 1000, FDs: fds}
}

func newServer(t *testing.T, loops int, fronts ...Frontend) *Server {
	t.Helper()
	s, err := New(Config{Frontends: fronts, Loops: loops, MaxConnections: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

// holdLoop keeps loop i of s busy on its own goroutine until the returned
// function is called: it accepts nothing meanwhile.
func holdLoop(s *Server, i int) (release func()) {
	held, done := make(chan struct{}), make(chan struct{})
	s.loops[i].Post(func() {
		close(held)
		<-done
	})
	<-held
	return sync.OnceFunc(func() { close(done) })
}

// A TCP listener served from fewer inherited sockets than loops shares
// them: every loop watches the one socket systemd passed, and each accepts
// from it. Held one at a time, the loops left accept every client.
func TestSharedInheritedSocketAcceptsOnEveryLoop(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	tp, _ := inheritPools(t, be.Addr, "")
	socks, err := listener.Bind("sd", "127.0.0.1:0", 0, 1) // what systemd would pass: one socket
	if err != nil {
		t.Fatal(err)
	}
	addr := socks.Addr.String()
	const loops = 3
	s := newServer(t, loops, Frontend{Name: "l", Bind: addr, Pool: tp, FDs: socks.FDs})
	if socks.FDs[0] != -1 {
		t.Fatal("the server did not take the inherited socket over")
	}
	s.Serve()
	for i := range loops {
		// Every loop but i is held: only loop i can accept.
		var releases []func()
		for j := range loops {
			if j != i {
				releases = append(releases, holdLoop(s, j))
			}
		}
		before := s.loops[i].Conns()
		c := dial(t, addr)
		r := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if tag, err := r.ReadString('\n'); err != nil || tag != "b\n" {
			t.Fatalf("with only loop %d free: %q, %v", i, tag, err)
		}
		if got := s.loops[i].Conns(); got != before+1 {
			t.Fatalf("loop %d holds %d connections, want %d: it did not accept from the shared socket", i, got, before+1)
		}
		c.Close()
		for _, rel := range releases {
			rel()
		}
	}
}

// More inherited sockets than loops: a loop serves several sockets of one
// listener, and no socket is left unwatched (each has its own accept queue,
// which the kernel fills by hash).
func TestMoreInheritedSocketsThanLoops(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	ube := testnet.StartUDPBackend(t, "ub", "")
	tp, up := inheritPools(t, be.Addr, ube.Addr)
	const k = 4
	tsocks, err := listener.Bind("t", "127.0.0.1:0", 0, k)
	if err != nil {
		t.Fatal(err)
	}
	usocks, err := listener.BindUDP("u", "127.0.0.1:0", k)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, 2,
		Frontend{Name: "l", Bind: tsocks.Addr.String(), Pool: tp, FDs: tsocks.FDs},
		udpFrontend(up, usocks.Addr.String(), usocks.FDs))
	s.Serve()
	// Every socket's queue gets clients: connect until each has one
	// accepted (the kernel hashes source ports over the k sockets).
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	const n = 64
	for range n {
		c := dial(t, tsocks.Addr.String())
		conns = append(conns, c)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if tag, err := bufio.NewReader(c).ReadString('\n'); err != nil || tag != "b\n" {
			t.Fatalf("client %d: %q, %v", len(conns), tag, err)
		}
	}
	if st := s.Stats()[0]; st.OK != n {
		t.Fatalf("%+v, want %d clients served", st, n)
	}
	for range n {
		c := udpClient(t, usocks.Addr.String())
		if reply, err := ask(c, []byte("who")); err != nil || string(reply) != "ub" {
			t.Fatalf("datagram: %q, %v", reply, err)
		}
	}
}

// A UDP listener with fewer inherited sockets than loops is served by as
// many loops as it has sockets: no loop shares one (a client's datagrams
// must reach one loop), and every client is answered.
func TestFewerInheritedUDPSocketsThanLoops(t *testing.T) {
	noLeaks(t)
	ube := testnet.StartUDPBackend(t, "ub", "")
	_, up := inheritPools(t, "", ube.Addr)
	usocks, err := listener.BindUDP("u", "127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, 3, udpFrontend(up, usocks.Addr.String(), usocks.FDs))
	s.Serve()
	watching := 0
	for _, l := range s.loops {
		socks, err := l.dupListeners()
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range socks {
			unix.Close(h.FD)
		}
		watching += len(socks)
	}
	if watching != 1 {
		t.Fatalf("%d loops watch the one UDP socket, want 1", watching)
	}
	for range 16 {
		c := udpClient(t, usocks.Addr.String())
		if reply, err := ask(c, []byte("who")); err != nil || string(reply) != "ub" {
			t.Fatalf("datagram: %q, %v", reply, err)
		}
	}
}

// The hand-over, as an upgrade does it between two processes: the new
// server is built on duplicates of the old one's sockets, then the old one
// stops watching and closes its own descriptors. Clients queued in the
// accept queues at that moment (accepted by nobody yet) are served by the
// new server: the sockets, with their queues, outlive the old descriptors.
// Binding fresh sockets and closing the old ones instead would reset every
// client queued on the old ones.
func TestHandoffKeepsQueuedClients(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	ube := testnet.StartUDPBackend(t, "ub", "")
	tp, up := inheritPools(t, be.Addr, ube.Addr)
	old := newServer(t, 2,
		Frontend{Name: "l", Bind: "127.0.0.1:0", Pool: tp},
		udpFrontend(up, "127.0.0.1:0", nil))
	old.Serve()
	taddr, _ := old.Addr("l")
	uaddr, _ := old.UDPAddr("u")
	if tag, err := testnet.Hello(taddr.String(), ""); err != nil || tag != "b" {
		t.Fatalf("old server: %q, %v", tag, err)
	}

	socks, err := old.HandoffSockets()
	if err != nil {
		t.Fatal(err)
	}
	var tcpFDs, udpFDs []int
	for _, h := range socks {
		in, err := listener.Describe(h.FD)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{false: "tcp", true: "udp"}[h.UDP]; in.Protocol != want {
			t.Fatalf("socket of listener %s is %s, want %s", h.Name, in.Protocol, want)
		}
		if h.UDP {
			udpFDs = append(udpFDs, h.FD)
		} else {
			tcpFDs = append(tcpFDs, h.FD)
		}
	}
	if len(tcpFDs) != 2 || len(udpFDs) != 2 {
		t.Fatalf("%d TCP and %d UDP sockets handed over, want one per loop: 2 and 2", len(tcpFDs), len(udpFDs))
	}
	// The new server has 3 loops: the TCP sockets are shared, the UDP ones
	// served by two loops.
	tcpNums := append([]int(nil), tcpFDs...) // the new server's loops own them; they are not running yet
	next := newServer(t, 3,
		Frontend{Name: "l", Bind: taddr.String(), Pool: tp, FDs: tcpFDs},
		udpFrontend(up, uaddr.String(), udpFDs))

	// The old server stops accepting; the new one does not accept yet.
	old.Unwatch()
	for _, l := range old.loops {
		l.CloseListeners()
		l.Do(func() {}) // closed by now
	}
	const n = 20
	var conns []*net.TCPConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		conns = append(conns, dial(t, taddr.String())) // completes in the kernel: queued
	}
	testnet.Eventually(t, "every client queued", func() bool {
		q := 0
		for _, fd := range tcpNums {
			got, _ := testnet.AcceptQueue(t, rawSock(fd))
			q += got
		}
		return q == n
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := old.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	next.Serve()
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if tag, err := bufio.NewReader(c).ReadString('\n'); err != nil || tag != "b\n" {
			t.Fatalf("client %d queued at the hand-over: %q, %v; want it served by the new server", i, tag, err)
		}
	}
	if st := next.Stats()[0]; st.OK != n {
		t.Fatalf("new server: %+v, want the %d queued clients", st, n)
	}
	c := udpClient(t, uaddr.String())
	if reply, err := ask(c, []byte("who")); err != nil || string(reply) != "ub" {
		t.Fatalf("datagram after the hand-over: %q, %v", reply, err)
	}
}

// rawSock lets testnet.AcceptQueue read a raw listening fd.
type rawSock int

func (f rawSock) SyscallConn() (syscall.RawConn, error) { return f, nil }
func (f rawSock) Control(fn func(fd uintptr)) error     { fn(uintptr(f)); return nil }
func (f rawSock) Read(func(fd uintptr) bool) error      { return syscall.ENOTSUP }
func (f rawSock) Write(func(fd uintptr) bool) error     { return syscall.ENOTSUP }
