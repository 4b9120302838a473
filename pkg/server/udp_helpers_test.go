package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// udpLB is an in-process l4lb with one UDP listener.
type udpLB struct {
	server *Server
	pool   *pool.Pool
	front  *udpsession.Front
	addr   string
}

type udpOpts struct {
	bind           string // "" : 127.0.0.1:0
	algorithm      string
	retries        int
	sessionTimeout time.Duration
	maxSessions    int
	responses      int
	requests       int
	failures       int // breaker failures that trip; 0: never trips
	cooldown       time.Duration
	countNoReply   bool
	replyTimeout   time.Duration
	reuseSockets   bool
	receiveBuffer  int
	loops          int
	log            *slog.Logger // nil: discarded
	// pool, when set, changes the pool's configuration last, right before
	// pool.New (backend IDs, health checks, any key the fields above leave
	// alone).
	pool func(*config.Pool)
}

func startUDPLB(t testing.TB, backends []string, o udpOpts) *udpLB {
	t.Helper()
	testnet.CheckLeaks(t)
	pc := config.DefaultPool("u")
	pc.Protocol = config.ProtocolUDP
	pc.Algorithm = config.AlgorithmRoundRobin
	if o.algorithm != "" {
		pc.Algorithm = o.algorithm
	}
	pc.Retries = o.retries
	pc.Health.Enabled = false
	pc.Breaker.Failures = 1_000_000
	if o.failures > 0 {
		pc.Breaker.Failures = o.failures
	}
	if o.cooldown > 0 {
		pc.Breaker.Cooldown = o.cooldown
		pc.Breaker.MaxCooldown = max(pc.Breaker.MaxCooldown, o.cooldown)
	}
	pc.Breaker.CountNoReply = o.countNoReply
	if o.replyTimeout > 0 {
		pc.ReplyTimeout = o.replyTimeout
	}
	for _, a := range backends {
		b := config.DefaultBackend()
		b.Addr = a
		pc.Backends = append(pc.Backends, b)
	}
	if o.pool != nil {
		o.pool(pc)
	}
	p, err := pool.New(pc, pool.Deps{Store: breaker.NewMemoryStore(nil), BreakerRefresh: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fe := Frontend{Name: "u", Bind: o.bind, Protocol: "udp", Pool: p,
		SessionTimeout: o.sessionTimeout, MaxSessions: o.maxSessions, Responses: o.responses, Requests: o.requests,
		ReuseSockets: o.reuseSockets, ReceiveBuffer: o.receiveBuffer}
	if fe.Bind == "" {
		fe.Bind = "127.0.0.1:0"
	}
	if fe.SessionTimeout == 0 {
		fe.SessionTimeout = time.Minute
	}
	if fe.MaxSessions == 0 {
		fe.MaxSessions = 1000
	}
	loops := o.loops
	if loops == 0 {
		loops = 2
	}
	s, err := New(Config{Frontends: []Frontend{fe}, Loops: loops, MaxConnections: 100, Logger: o.log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	s.Serve()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		s.Shutdown(sctx)
		cancel()
		wg.Wait()
	})
	ua, err := s.UDPAddr("u")
	if err != nil {
		t.Fatal(err)
	}
	return &udpLB{server: s, pool: p, front: s.UDPFronts()[0], addr: ua.String()}
}

// udpClient is one client socket (one source port) talking to addr.
func udpClient(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ask sends p and returns the reply, resending up to a few times (UDP may
// drop on a loaded machine; the tests count on the proxy, not the kernel,
// for what they check).
func ask(c *net.UDPConn, p []byte) ([]byte, error) {
	buf := make([]byte, 1<<16)
	var err error
	for range 5 {
		if _, err = c.Write(p); err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var n int
		n, err = c.Read(buf)
		if err == nil {
			return buf[:n], nil
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no reply after 5 tries: %w", err)
}

// askOnce sends p once and waits for one reply.
func askOnce(c *net.UDPConn, p []byte, wait time.Duration) ([]byte, error) {
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

func mustEcho(t *testing.T, c *net.UDPConn, p []byte) {
	t.Helper()
	got, err := ask(c, p)
	if err != nil {
		t.Fatalf("%d-byte datagram: %v", len(p), err)
	}
	if !bytes.Equal(got, p) {
		t.Fatalf("%d-byte datagram came back as %d bytes, different", len(p), len(got))
	}
}

func who(t *testing.T, c *net.UDPConn) string {
	t.Helper()
	got, err := ask(c, []byte("who"))
	if err != nil {
		t.Fatalf("who: %v", err)
	}
	return string(got)
}

// parallelDo runs f(0..n-1) on n goroutines and returns the first error.
func parallelDo(n int, f func(i int) error) error {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs <- f(i) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func countOpenFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// kernelDrop: a drop the kernel made (a full socket receive buffer), left
// out by tests asserting that the proxy drops nothing: it depends on the
// machine's load, and their clients send again.
func kernelDrop(r udpsession.DropReason) bool { return r == udpsession.DropSocketBuffer }

// stallLoop holds l's goroutine in a task until release is called, so
// datagrams sent meanwhile wait in the kernel and reach the loop together:
// in one recvmmsg, and with their epoll events in the order they arrived.
func stallLoop(t *testing.T, l *cpuLoop) (release func()) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	l.Post(func() {
		close(entered)
		<-held
	})
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the loop never ran the stalling task")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return release
}

// drops is f's nonzero drop counts, by reason.
func drops(f *udpsession.Front) map[string]int64 {
	m := map[string]int64{}
	for r := range udpsession.NumDropReasons {
		if n := f.Drops[r].Load(); n != 0 {
			m[r.String()] = n
		}
	}
	return m
}

// taken counts the client datagrams the listener has dealt with: relayed
// or dropped.
func taken(f *udpsession.Front) int64 {
	n := f.DatagramsToBackend.Load()
	for r := range udpsession.NumDropReasons {
		if !kernelDrop(r) { // never read: the listener did not deal with it
			n += f.Drops[r].Load()
		}
	}
	return n
}

// echoOnce sends p once and fails t unless the one reply is p.
func echoOnce(t *testing.T, c *net.UDPConn, p []byte) {
	t.Helper()
	got, err := askOnce(c, p, 20*time.Second)
	if err != nil || !bytes.Equal(got, p) {
		t.Fatalf("%d-byte datagram: reply of %d bytes, %v", len(p), len(got), err)
	}
}

func readOne(t *testing.T, c *net.UDPConn) string {
	t.Helper()
	buf := make([]byte, 1<<16)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("%s: %v", c.LocalAddr(), err)
	}
	return string(buf[:n])
}
