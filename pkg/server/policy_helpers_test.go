package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxyproto"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/sockopt"
	"github.com/l4lb/l4lb/pkg/splice"
)

// listenerPolicy is a listener's relay.Policy as cmd/l4lb builds it at
// start: nil when the listener checks nothing.
func listenerPolicy(l config.Listener) *relay.Policy { return relay.PolicyFor(l, nil) }

// listenerKeepalive is a listener's client-side keepalive, as cmd/l4lb's
// clientKeepalive.
func listenerKeepalive(l config.Listener) sockopt.Keepalive {
	return sockopt.Keepalive{Idle: l.Keepalive, Interval: l.KeepaliveInterval, Count: l.KeepaliveCount}
}

// beSpec is one [[pool.p.backend]] of policyTOML.
type beSpec struct {
	addr     string
	weight   int // 0: the default (1)
	maxConns int
}

// policyTOML renders listener "front" bound to bind ("" for a free port on
// 127.0.0.1) with listenerExtra in its table, feeding pool "p" (health
// checks off) with poolExtra in its table and the given backends.
func policyTOML(t *testing.T, bind, listenerExtra, algorithm, poolExtra string, backends ...beSpec) string {
	t.Helper()
	if bind == "" {
		bind = testnet.FreeAddr(t)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n%s\n", bind, listenerExtra)
	fmt.Fprintf(&b, "[pool.p]\nalgorithm = %q\n%s\n", algorithm, poolExtra)
	for _, be := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", be.addr)
		if be.weight > 0 {
			fmt.Fprintf(&b, "weight = %d\n", be.weight)
		}
		if be.maxConns > 0 {
			fmt.Fprintf(&b, "max_connections = %d\n", be.maxConns)
		}
	}
	b.WriteString("[pool.p.health]\nenabled = false\n")
	return b.String()
}

// freeAddr6 is "[::1]:PORT" with a FreePort; the test is skipped where
// there is no IPv6 loopback.
func freeAddr6(t *testing.T) string {
	t.Helper()
	if !testnet.HasIPv6() {
		t.Skip("no IPv6 loopback")
	}
	return fmt.Sprintf("[::1]:%d", testnet.FreePort(t))
}

// closesOf is listener name's close counts now.
func (l *lb) closesOf(name string) ListenerCloses {
	for _, c := range l.server.Closes() {
		if c.Name == name {
			return c
		}
	}
	return ListenerCloses{}
}

// waitCloses waits until listener "front" counts exactly n closes for
// reason why.
func waitCloses(t *testing.T, l *lb, why relay.CloseReason, n int64) {
	t.Helper()
	var got int64
	testnet.Eventually(t, fmt.Sprintf("%d closes as %s", n, why), func() bool {
		got = l.closesOf("front").Closed[why]
		return got == n
	})
}

// checkFrontCloses checks listener "front"'s close counts: exactly want for the
// reasons named, 0 for every other one but those in any (not checked); and,
// once no client is open, that every client counts once by result too
// (OK, Failed, Rejected), as the metrics count them. (A relayed client
// counts as OK from its connect, by reason from its end.)
func checkFrontCloses(t *testing.T, l *lb, want map[relay.CloseReason]int64, any ...relay.CloseReason) {
	t.Helper()
	got := l.closesOf("front").Closed
	var sum int64
	for _, n := range got {
		sum += n
	}
	if st := l.listener("front"); l.server.Active() == 0 && st.OK+st.Failed+st.Rejected != sum {
		t.Errorf("%d clients ended by reason %v, but %d by result (%+v)", sum, fmtCloses(got), st.OK+st.Failed+st.Rejected, st)
	}
	skip := map[relay.CloseReason]bool{}
	for _, r := range any {
		skip[r] = true
	}
	for r := range relay.NumCloseReasons {
		if skip[r] {
			continue
		}
		if got[r] != want[r] {
			t.Errorf("closes as %s = %d, want %d (all: %v)", r, got[r], want[r], fmtCloses(got))
		}
	}
}

func fmtCloses(c [relay.NumCloseReasons]int64) string {
	var parts []string
	for r := range relay.NumCloseReasons {
		if c[r] != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", r, c[r]))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// barrier returns once every event loop of l has finished what it was
// doing (a turn in progress: an accept, a policy check, a queueing).
func (l *lb) barrier() {
	for _, lp := range l.server.loops {
		lp.Do(func() {})
	}
}

// dialFrom connects to addr from local (an address of 127.0.0.0/8 or ::1;
// "" lets the kernel choose).
func dialFrom(t *testing.T, local, addr string) *net.TCPConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// servedBy reads the tag line of the testnet.Backend that answered c.
func servedBy(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	line, err := readLine(c)
	if err != nil {
		t.Fatalf("client %s: no backend answered: %v", c.LocalAddr(), err)
	}
	return line
}

// readLine reads one '\n'-terminated line a byte at a time (so nothing
// after it is consumed) and returns it without the '\n'.
func readLine(c net.Conn) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := c.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				return string(b), nil
			}
			b = append(b, one[0])
		}
		if err != nil {
			return string(b), err
		}
	}
}

// refused checks that l4lb closed c without relaying a byte: the read
// ends with EOF (reset false) or ECONNRESET (reset true).
func refused(t *testing.T, c net.Conn, reset bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if len(b) > 0 {
		t.Fatalf("client %s: got %q, want to be refused", c.LocalAddr(), b)
	}
	switch {
	case reset && !errors.Is(err, syscall.ECONNRESET):
		t.Fatalf("client %s: read ended with %v, want a reset", c.LocalAddr(), err)
	case !reset && err != nil:
		t.Fatalf("client %s: read ended with %v, want EOF", c.LocalAddr(), err)
	}
}

// ppBackend is a backend that reads a PROXY header from each connection
// (proxyproto.Parse), answers one line "SRC DST" with the addresses it
// read (or "LOCAL", or "BAD <error>" and closes), then echoes every byte
// that followed the header.
type ppBackend struct {
	Tag      string
	Addr     string
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	// peers are the remote addresses of the connections accepted, in
	// order (l4lb's backend-side sockets).
	peers []string
}

func startPPBackend(t *testing.T, tag string) *ppBackend {
	t.Helper()
	testnet.CheckLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &ppBackend{Tag: tag, Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.Close)
	return b
}

func (b *ppBackend) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.accepted.Add(1)
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.peers = append(b.peers, c.RemoteAddr().String())
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() {
				b.mu.Lock()
				delete(b.conns, c)
				b.mu.Unlock()
				c.Close()
			}()
			b.handle(c)
		}()
	}
}

func (b *ppBackend) handle(c net.Conn) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	var h proxyproto.Header
	var hl int
	for {
		n, err := c.Read(tmp)
		buf = append(buf, tmp[:n]...)
		var perr error
		h, hl, perr = proxyproto.Parse(buf)
		if perr == nil {
			break
		}
		if !errors.Is(perr, proxyproto.ErrNeedMore) {
			fmt.Fprintf(c, "BAD %v\n", perr)
			return
		}
		if err != nil {
			fmt.Fprintf(c, "BAD %v after %q\n", err, buf)
			return
		}
	}
	line := fmt.Sprintf("%s %s v%d", h.Src, h.Dst, h.Version)
	if h.Local {
		line = "LOCAL"
	}
	if _, err := fmt.Fprintf(c, "%s %s\n", b.Tag, line); err != nil {
		return
	}
	if rest := buf[hl:]; len(rest) > 0 {
		if _, err := c.Write(rest); err != nil {
			return
		}
	}
	for {
		n, err := c.Read(tmp)
		if n > 0 {
			if _, werr := c.Write(tmp[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			c.(*net.TCPConn).CloseWrite()
			return
		}
	}
}

// Accepted counts the connections the backend accepted.
func (b *ppBackend) Accepted() int64 { return b.accepted.Load() }

func (b *ppBackend) Close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// ppAnswer is what a ppBackend told a client: its tag and the header's
// addresses.
type ppAnswer struct {
	tag      string
	src, dst netip.AddrPort
	version  string
}

// readPPAnswer reads a ppBackend's answer line from c.
func readPPAnswer(t *testing.T, c net.Conn) ppAnswer {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	line, err := readLine(c)
	if err != nil {
		t.Fatalf("client %s: no answer from the backend: %q, %v", c.LocalAddr(), line, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 {
		t.Fatalf("client %s: backend answered %q", c.LocalAddr(), line)
	}
	src, err1 := netip.ParseAddrPort(f[1])
	dst, err2 := netip.ParseAddrPort(f[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("client %s: backend answered %q", c.LocalAddr(), line)
	}
	return ppAnswer{tag: f[0], src: src, dst: dst, version: f[3]}
}

// echoed writes payload on c and checks that exactly it comes back.
func echoed(t *testing.T, c net.Conn, payload []byte) {
	t.Helper()
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	readExactly(t, c, payload)
}

// readExactly reads len(want) bytes from c and checks they are want.
func readExactly(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("client %s: reading the echo: %v (got %q)", c.LocalAddr(), err, got)
	}
	if string(got) != string(want) {
		t.Fatalf("client %s: echo %q, want %q", c.LocalAddr(), got, want)
	}
}

// mustAddrPort parses "ip:port" of a net.Addr.
func mustAddrPort(t *testing.T, a net.Addr) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// startLBHooked is startLB with one event loop and a chance to set hooks
// of the server's shared state (hook) before its loop starts.
func startLBHooked(t *testing.T, text string, maxConns int, hook func(*relay.Shared)) *lb {
	t.Helper()
	testnet.CheckLeaks(t)
	cfg, err := config.Parse("test.toml", []byte(text))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", text, err)
	}
	l := &lb{pools: map[string]*pool.Pool{}, pipes: splice.NewPipePool(splice.PipePoolConfig{MaxOpen: 64, MaxIdle: 8})}
	store := breaker.NewMemoryStore(nil)
	for _, name := range cfg.PoolNames {
		p, err := pool.New(cfg.Pools[name], pool.Deps{Store: store, BreakerRefresh: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		l.pools[name] = p
	}
	var fronts []Frontend
	for _, lc := range cfg.Listeners {
		fronts = append(fronts, Frontend{Name: lc.Name, Bind: lc.Bind, Pool: l.pools[lc.Pool],
			Policy: listenerPolicy(lc), Keepalive: listenerKeepalive(lc)})
	}
	l.server, err = New(Config{Frontends: fronts, Loops: 1, MaxConnections: maxConns, Pipes: l.pipes})
	if err != nil {
		t.Fatal(err)
	}
	hook(l.server.sh)
	l.addr = cfg.Listeners[0].Bind
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range l.pools {
		wg.Go(func() { p.Run(ctx) })
	}
	l.server.Serve()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		l.server.Shutdown(sctx)
		cancel()
		wg.Wait()
	})
	return l
}
