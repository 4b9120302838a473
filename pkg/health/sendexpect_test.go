package health

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// These tests run the checks against real sockets on 127.0.0.1. A check
// that should pass or fail on an answer gets a generous timeout it never
// needs; only checks that must time out get a short one, and no test
// asserts how long anything took.

// isLocal is the pool's classification in small: EMFILE, ENOBUFS and a
// check called off are local trouble.
func isLocal(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENOBUFS)
}

func emfileDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.EMFILE}
}

// run makes one check with a timeout and returns its outcome and whether
// the check returned before that timeout ran out.
func run(c Check, timeout time.Duration) (o Outcome, early bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	o = c(ctx)
	return o, ctx.Err() == nil
}

// wantOutcome fails t unless o is want, with no error on a pass and an
// error containing cause otherwise ("": any error, for failures whose
// errno loopback does not fix, as a reset seen on the write or the read).
func wantOutcome(t *testing.T, o Outcome, want Result, cause string) {
	t.Helper()
	if o.Result != want {
		t.Fatalf("got %v (%v), want %v", o.Result, o.Err, want)
	}
	switch {
	case want == Pass && o.Err != nil:
		t.Fatalf("a pass with an error: %v", o.Err)
	case want != Pass && o.Err == nil:
		t.Fatalf("a %v without a cause", want)
	case want != Pass && !strings.Contains(o.Err.Error(), cause):
		t.Fatalf("%v, cause %q; want it to say %q", want, o.Err, cause)
	}
}

const (
	generous = 30 * time.Second       // never needed by a check that gets an answer
	short    = 200 * time.Millisecond // for checks that must wait it out
)

// tcpServer accepts on a free port of 127.0.0.1 and runs handle on each
// connection in a goroutine, closing the connection when handle returns.
// Everything is closed and waited for when the test ends.
func tcpServer(t *testing.T, handle func(c *net.TCPConn)) string {
	t.Helper()
	testnet.CheckLeaks(t)
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[*net.TCPConn]bool{}
	wg.Go(func() {
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				handle(c)
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// deadTCP is an address on 127.0.0.1 where nothing listens: refused.
func deadTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// answer reads the request (len(req) bytes) and writes reply.
func answer(req int, reply []byte) func(c *net.TCPConn) {
	return func(c *net.TCPConn) {
		c.SetDeadline(time.Now().Add(generous))
		if _, err := io.ReadFull(c, make([]byte, req)); err != nil {
			return
		}
		c.Write(reply)
		io.Copy(io.Discard, c) // until the check closes
	}
}

func TestTCPSendExpect(t *testing.T) {
	echo := func(c *net.TCPConn) {
		// Not io.Copy(c, c): TCP to TCP splices through a pipe the runtime
		// keeps, which the leak check would report.
		buf := make([]byte, 512)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	acceptClose := func(c *net.TCPConn) {}
	reset := func(c *net.TCPConn) { c.SetLinger(0) }
	silent := func(c *net.TCPConn) { io.Copy(io.Discard, c) }
	banner := func(c *net.TCPConn) { c.Write([]byte("+OK ready\r\n")); io.Copy(io.Discard, c) }
	pieces := func(c *net.TCPConn) {
		c.SetNoDelay(true)
		if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
			return
		}
		for _, b := range []byte("PONG\r\n") {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
		}
		io.Copy(io.Discard, c)
	}
	// Reads the request first, so that its close is a FIN, not a reset.
	shortReply := func(c *net.TCPConn) {
		if _, err := io.ReadFull(c, make([]byte, len("PING\r\n"))); err == nil {
			c.Write([]byte("PO"))
		}
	}
	binReq := []byte{0x00, 0x01, 0xfe, 0xff, 0x0a}
	binReply := []byte{0xca, 0xfe, 0x00, 0xba, 0xbe, 0x0d, 0x0a}
	ping, pong := []byte("PING\r\n"), []byte("PONG")

	tests := []struct {
		name         string
		handle       func(c *net.TCPConn) // nil: nothing listens (refused)
		dial         DialFunc
		send, expect []byte
		timeout      time.Duration
		want         Result
		cause        string // what the outcome's error says
	}{
		{"echo passes", echo, nil, ping, []byte("PING"), generous, Pass, ""},
		{"reply starting with expect passes", answer(len(ping), []byte("PONG and more\r\n")), nil, ping, pong, generous, Pass, ""},
		{"reply in one-byte pieces passes", pieces, nil, []byte("PING\n"), []byte("PONG\r\n"), generous, Pass, ""},
		{"nothing sent, banner read", banner, nil, nil, []byte("+OK"), generous, Pass, ""},
		{"binary (hex) bytes both ways", answer(len(binReq), binReply), nil, binReq, binReply[:4], generous, Pass, ""},
		{"empty expect passes on any byte", answer(len(ping), []byte("x")), nil, ping, nil, generous, Pass, ""},
		{"wrong prefix fails", answer(len(ping), []byte("-ERR no\r\n")), nil, ping, pong, generous, Fail, `does not start with expected "PONG"`},
		{"wrong binary byte fails", answer(len(binReq), []byte{0xca, 0xfe, 0x01, 0xba}), nil, binReq, binReply[:4], generous, Fail, "does not start with expected 0xcafe00ba"},
		{"reply shorter than expect, then close, fails", shortReply, nil, ping, pong, generous, Fail,
			`closed by the backend before the expected reply was complete (got 2 of 4 bytes: "PO", expected "PONG")`},
		{"accept and close at once fails", acceptClose, nil, ping, pong, generous, Fail, ""},
		{"accept and close at once fails with empty expect", acceptClose, nil, ping, nil, generous, Fail, ""},
		{"accept and close at once fails with nothing sent", acceptClose, nil, nil, nil, generous, Fail, "closed by the backend before any reply"},
		{"reset fails", reset, nil, ping, pong, generous, Fail, ""},
		{"silent backend fails at the timeout", silent, nil, ping, pong, short, Fail, "reading the reply (got 0 of 4 bytes): timed out"},
		{"refused fails", nil, nil, ping, pong, generous, Fail, "connection refused"},
		{"local trouble is inconclusive", echo, emfileDial, ping, pong, generous, Inconclusive, "too many open files"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := deadTCP(t)
			if tc.handle != nil {
				addr = tcpServer(t, tc.handle)
			}
			send, expect := bytes.Clone(tc.send), bytes.Clone(tc.expect)
			check := TCPSendExpectCheck(tc.dial, addr, send, expect, isLocal)
			// The check keeps its own copies.
			for i := range send {
				send[i] ^= 0xff
			}
			for i := range expect {
				expect[i] ^= 0xff
			}
			o, early := run(check, tc.timeout)
			wantOutcome(t, o, tc.want, tc.cause)
			if tc.timeout == generous && !early {
				t.Fatalf("the check waited out its %v timeout", generous)
			}
		})
	}
}

// The case the send-expect check exists for: a backend that accepts and
// closes at once passes a connect check and fails send-expect.
func TestAcceptCloseFailsSendExpectNotConnect(t *testing.T) {
	addr := tcpServer(t, func(c *net.TCPConn) {})
	if o, _ := run(TCPCheck(nil, addr, isLocal), generous); o.Result != Pass {
		t.Fatalf("connect check: %v (%v), want pass", o.Result, o.Err)
	}
	if o, _ := run(TCPSendExpectCheck(nil, addr, []byte("hello\n"), nil, isLocal), generous); o.Result != Fail || o.Err == nil {
		t.Fatalf("send-expect check: %v (%v), want fail with a cause", o.Result, o.Err)
	}
}

// A check called off by its caller (shutdown) while it waits for the reply
// says nothing about the backend.
func TestTCPSendExpectCanceled(t *testing.T) {
	accepted := make(chan struct{}, 1)
	addr := tcpServer(t, func(c *net.TCPConn) {
		accepted <- struct{}{}
		io.Copy(io.Discard, c)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan Outcome, 1)
	go func() { res <- TCPSendExpectCheck(nil, addr, []byte("PING\n"), []byte("PONG"), isLocal)(ctx) }()
	<-accepted
	cancel()
	o := <-res
	// Called off while it waits for the reply, or (on a busy host) while
	// its dial still returns.
	wantOutcome(t, o, Inconclusive, "canceled")
	if !errors.Is(o.Err, context.Canceled) {
		t.Fatalf("canceled check's error %v does not wrap context.Canceled", o.Err)
	}
}

// udpServer answers every datagram on a free port of 127.0.0.1 with
// reply(request), or not at all when reply returns false. It counts the
// datagrams it received and keeps the last one.
type udpServer struct {
	Addr  string
	conn  *net.UDPConn
	count atomic.Int64
	mu    sync.Mutex
	last  []byte
}

func startUDP(t *testing.T, reply func(req []byte) ([]byte, bool)) *udpServer {
	t.Helper()
	testnet.CheckLeaks(t)
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &udpServer{Addr: conn.LocalAddr().String(), conn: conn}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			req := bytes.Clone(buf[:n])
			s.mu.Lock()
			s.last = req
			s.mu.Unlock()
			s.count.Add(1)
			if resp, ok := reply(req); ok {
				conn.WriteToUDP(resp, from)
			}
		}
	})
	t.Cleanup(func() {
		conn.Close()
		wg.Wait()
	})
	return s
}

func (s *udpServer) lastRequest() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func udpEcho(req []byte) ([]byte, bool)   { return req, true }
func udpSilent(req []byte) ([]byte, bool) { return nil, false }
func udpReply(b []byte) func([]byte) ([]byte, bool) {
	return func([]byte) ([]byte, bool) { return b, true }
}

// deadUDP is an address on 127.0.0.1 where no UDP socket is bound: a
// datagram sent there draws an ICMP port unreachable.
func deadUDP(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

func TestUDPSendExpect(t *testing.T) {
	hexReq := []byte{0xde, 0xad, 0x00, 0xbe, 0xef}
	hexReply := append([]byte{0x81, 0x80, 0x00}, hexReq...)
	long := append([]byte("+PONG"), bytes.Repeat([]byte{'z'}, 4000)...)
	tests := []struct {
		name         string
		reply        func([]byte) ([]byte, bool) // nil: nothing bound (refused)
		dial         DialFunc
		send, expect []byte
		timeout      time.Duration
		want         Result
		cause        string // what the outcome's error says
	}{
		{"echo passes", udpEcho, nil, []byte("ping"), []byte("ping"), generous, Pass, ""},
		{"binary (hex) bytes both ways", udpReply(hexReply), nil, hexReq, hexReply[:5], generous, Pass, ""},
		{"a long reply starting with expect passes", udpReply(long), nil, []byte("ping"), []byte("+PONG"), generous, Pass, ""},
		{"empty expect passes on any datagram", udpReply([]byte("x")), nil, []byte("ping"), nil, generous, Pass, ""},
		{"empty expect passes on an empty datagram", udpReply(nil), nil, []byte("ping"), nil, generous, Pass, ""},
		{"wrong prefix fails", udpReply([]byte("-ERR")), nil, []byte("ping"), []byte("+PONG"), generous, Fail, `reply "-ERR" does not start with expected "+PONG"`},
		{"reply shorter than expect fails", udpReply([]byte("+PO")), nil, []byte("ping"), []byte("+PONG"), generous, Fail,
			`reply "+PO" is shorter than expected "+PONG" (3 of 5 bytes)`},
		{"wrong binary byte fails", udpReply([]byte{0x81, 0x80, 0x01}), nil, hexReq, hexReply[:3], generous, Fail, "reply 0x818001 does not start with expected 0x818000"},
		{"nothing bound is refused at once", nil, nil, []byte("ping"), []byte("ping"), generous, Fail, "waiting for the reply: read udp"},
		{"silent backend fails at the timeout", udpSilent, nil, []byte("ping"), []byte("ping"), short, Fail, "waiting for the reply: timed out"},
		{"local trouble is inconclusive", udpEcho, emfileDial, []byte("ping"), []byte("ping"), generous, Inconclusive, "too many open files"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := deadUDP(t)
			if tc.reply != nil {
				addr = startUDP(t, tc.reply).Addr
			}
			o, early := run(UDPSendExpectCheck(tc.dial, addr, tc.send, tc.expect, isLocal), tc.timeout)
			wantOutcome(t, o, tc.want, tc.cause)
			if tc.reply == nil && !errors.Is(o.Err, syscall.ECONNREFUSED) {
				t.Fatalf("refused check's error %v does not wrap ECONNREFUSED", o.Err)
			}
			if tc.timeout == generous && !early {
				t.Fatalf("the check waited out its %v timeout", generous)
			}
		})
	}
}

// An empty send is one empty datagram; and a check sends one datagram,
// never a second, even when no reply comes.
func TestUDPSendExpectDatagrams(t *testing.T) {
	echo := startUDP(t, udpEcho)
	if o, _ := run(UDPSendExpectCheck(nil, echo.Addr, nil, nil, isLocal), generous); o.Result != Pass {
		t.Fatalf("empty request to an echo: %v (%v), want pass", o.Result, o.Err)
	}
	if n, req := echo.count.Load(), echo.lastRequest(); n != 1 || len(req) != 0 {
		t.Fatalf("echo got %d datagrams, last %q; want one empty datagram", n, req)
	}

	silent := startUDP(t, udpSilent)
	if o, _ := run(UDPSendExpectCheck(nil, silent.Addr, []byte("ping"), []byte("pong"), isLocal), short); o.Result != Fail {
		t.Fatalf("silent backend: %v (%v), want fail", o.Result, o.Err)
	}
	testnet.Eventually(t, "the silent backend to read the request", func() bool { return silent.count.Load() >= 1 })
	if n := silent.count.Load(); n != 1 {
		t.Fatalf("one check sent %d datagrams, want 1", n)
	}
}

func TestUDPSendExpectCanceled(t *testing.T) {
	silent := startUDP(t, udpSilent)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan Outcome, 1)
	go func() { res <- UDPSendExpectCheck(nil, silent.Addr, []byte("ping"), nil, isLocal)(ctx) }()
	testnet.Eventually(t, "the request to arrive", func() bool { return silent.count.Load() == 1 })
	cancel()
	wantOutcome(t, <-res, Inconclusive, "waiting for the reply: called off (context canceled)")
}

func TestUDPRefusal(t *testing.T) {
	tests := []struct {
		name    string
		reply   func([]byte) ([]byte, bool) // nil: nothing bound (refused)
		dial    DialFunc
		timeout time.Duration
		want    Result
		cause   string // what the outcome's error says
	}{
		{"nothing bound is refused at once", nil, nil, generous, Fail, "waiting for a refusal: read udp"},
		{"silence passes: no evidence of refusal", udpSilent, nil, short, Pass, ""},
		{"a reply passes at once", udpEcho, nil, generous, Pass, ""},
		{"local trouble is inconclusive", udpEcho, emfileDial, generous, Inconclusive, "too many open files"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := deadUDP(t)
			var s *udpServer
			if tc.reply != nil {
				s = startUDP(t, tc.reply)
				addr = s.Addr
			}
			o, early := run(UDPRefusalCheck(tc.dial, addr, isLocal), tc.timeout)
			wantOutcome(t, o, tc.want, tc.cause)
			if tc.reply == nil && !errors.Is(o.Err, syscall.ECONNREFUSED) {
				t.Fatalf("refused probe's error %v does not wrap ECONNREFUSED", o.Err)
			}
			if tc.timeout == generous && !early {
				t.Fatalf("the check waited out its %v timeout", generous)
			}
			if s != nil && tc.dial == nil {
				testnet.Eventually(t, "the probe datagram to arrive", func() bool { return s.count.Load() >= 1 })
				if n, req := s.count.Load(), s.lastRequest(); n != 1 || len(req) != 0 {
					t.Fatalf("backend got %d datagrams, last %q; want one empty datagram", n, req)
				}
			}
		})
	}
}

func TestUDPRefusalCanceledOrOutOfTime(t *testing.T) {
	silent := startUDP(t, udpSilent)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan Outcome, 1)
	go func() { res <- UDPRefusalCheck(nil, silent.Addr, isLocal)(ctx) }()
	testnet.Eventually(t, "the probe datagram to arrive", func() bool { return silent.count.Load() == 1 })
	cancel()
	wantOutcome(t, <-res, Inconclusive, "waiting for a refusal: called off (context canceled)")

	// A deadline already past: nothing was asked, nothing learned.
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	wantOutcome(t, UDPRefusalCheck(nil, deadUDP(t), isLocal)(ctx), Inconclusive, "out of time before the probe was sent")
}

// fakeConn is a connected socket whose reads and writes fail as told, for
// errors loopback cannot produce.
type fakeConn struct {
	net.Conn
	readErr, writeErr error
}

func (c *fakeConn) Read([]byte) (int, error) {
	if c.readErr != nil {
		return 0, c.readErr
	}
	return 0, nil
}
func (c *fakeConn) Write(b []byte) (int, error) {
	if c.writeErr != nil {
		return 0, c.writeErr
	}
	return len(b), nil
}
func (c *fakeConn) Close() error                     { return nil }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

func fakeDial(c *fakeConn) DialFunc {
	return func(context.Context, string, string) (net.Conn, error) { return c, nil }
}

func TestUDPErrorsFromTheSocket(t *testing.T) {
	opErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "udp", Err: errno}
	}
	tests := []struct {
		name                    string
		conn                    *fakeConn
		refusal, sexp           Result
		refusalCause, sexpCause string // what the outcomes' errors say
	}{
		{"host unreachable fails", &fakeConn{readErr: opErr("read", syscall.EHOSTUNREACH)}, Fail, Fail,
			"waiting for a refusal: read udp: no route to host", "waiting for the reply: read udp: no route to host"},
		{"network unreachable fails", &fakeConn{readErr: opErr("read", syscall.ENETUNREACH)}, Fail, Fail,
			"network is unreachable", "network is unreachable"},
		{"refused on write fails", &fakeConn{writeErr: opErr("write", syscall.ECONNREFUSED)}, Fail, Fail,
			"sending the probe datagram: write udp: connection refused", "sending the request: write udp: connection refused"},
		{"no buffers on write is local", &fakeConn{writeErr: opErr("write", syscall.ENOBUFS)}, Inconclusive, Inconclusive,
			"no buffer space available", "no buffer space available"},
		{"an empty reply", &fakeConn{}, Pass, Fail, "", `reply "" is shorter than expected "a" (0 of 1 bytes)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := run(UDPRefusalCheck(fakeDial(tc.conn), "192.0.2.1:53", isLocal), generous)
			wantOutcome(t, o, tc.refusal, tc.refusalCause)
			o, _ = run(UDPSendExpectCheck(fakeDial(tc.conn), "192.0.2.1:53", []byte("q"), []byte("a"), isLocal), generous)
			wantOutcome(t, o, tc.sexp, tc.sexpCause)
		})
	}
}

// The cause of a wrong reply names both what came and what was expected,
// here from a real listener on 127.0.0.1.
func TestTCPSendExpectWrongReplyCause(t *testing.T) {
	req := []byte("GET /health HTTP/1.0\r\n\r\n")
	addr := tcpServer(t, answer(len(req), []byte("HTTP/1.0 500 Internal Server Error\r\n\r\n")))
	o, _ := run(TCPSendExpectCheck(nil, addr, req, []byte("HTTP/1.0 200"), isLocal), generous)
	wantOutcome(t, o, Fail, `does not start with expected "HTTP/1.0 200"`)
	// However the reply was split into reads, what came up to the wrong
	// byte is shown (all 12 bytes on loopback, where it is one segment).
	if msg := o.Err.Error(); !strings.HasPrefix(msg, `reply "HTTP/1.0 5`) {
		t.Fatalf("wrong reply's error %q does not show the reply", msg)
	}
}

// A backend that closes before the whole expected reply came: the cause
// counts the bytes that did, and shows them.
func TestTCPSendExpectClosedEarlyCause(t *testing.T) {
	req := []byte("GET /health HTTP/1.0\r\n\r\n")
	// It reads the request before it closes: a FIN, never a reset.
	addr := tcpServer(t, func(c *net.TCPConn) {
		if _, err := io.ReadFull(c, make([]byte, len(req))); err == nil {
			c.Write([]byte("HTTP/1.0"))
		}
	})
	o, _ := run(TCPSendExpectCheck(nil, addr, req, []byte("HTTP/1.0 200"), isLocal), generous)
	wantOutcome(t, o, Fail, `closed by the backend before the expected reply was complete (got 8 of 12 bytes: "HTTP/1.0", expected "HTTP/1.0 200")`)
}

// A refused send-expect check keeps the dial's errno.
func TestTCPSendExpectRefusedCause(t *testing.T) {
	o, _ := run(TCPSendExpectCheck(nil, deadTCP(t), []byte("PING\r\n"), []byte("PONG"), isLocal), generous)
	if o.Result != Fail || !errors.Is(o.Err, syscall.ECONNREFUSED) {
		t.Fatalf("refused send-expect: %v, %v; want fail with ECONNREFUSED", o.Result, o.Err)
	}
}
