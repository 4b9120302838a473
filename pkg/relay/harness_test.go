package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/reactor"
	"github.com/l4lb/l4lb/pkg/splice"
)

// The harness runs the TCP relay as l4lb does, minus pkg/server: a Shared,
// one or more reactors each with its relay Loop, and a Front per listener over a pool built from a
// TOML text, with the listening sockets from listener.Bind.

// frontSpec is one listener of a harness and the pool it feeds (a pool of
// the same name).
type frontSpec struct {
	name     string
	backends []string
	// keys are extra TOML keys of [pool.NAME], e.g. `idle_timeout = "1s"`.
	keys string
}

type harnessOpts struct {
	loops int              // 0: one
	max   int64            // connection cap; 0: 100000
	pipes *splice.PipePool // nil: 1 MiB pipes, at most 256, 16 idle
	// noPipes gives the loops no pipe pool: every byte is copied.
	noPipes bool
	fronts  []frontSpec
	// wakeCoalesce is [global] wake_coalesce; 0: l4lb's default, so every
	// test runs the data path as shipped. noCoalesce turns it off.
	wakeCoalesce time.Duration
	noCoalesce   bool
	// clock replaces the loops' clock; nil: the real one.
	clock clock.Clock
}

type harness struct {
	t       *testing.T
	sh      *Shared
	pipes   *splice.PipePool
	loops   []*Loop
	fronts  map[string]*testFront
	logs    *logRecorder
	pipeFDs int // "pipe:" fds open when the harness was made
	started bool
}

type testFront struct {
	*Front
	addr string
}

// newHarness starts the loops with a listener per front. Every test that
// uses it is leak-checked (testnet.CheckLeaks), and when the test ends
// (its own ends of every connection closed by then) the harness checks
// that the loops closed every connection on their own, that no pipe is
// held or left open, and that every backend's active count is back to 0;
// then it stops the loops.
func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	testnet.CheckLeaks(t)
	if o.loops <= 0 {
		o.loops = 1
	}
	if o.max <= 0 {
		o.max = 100000
	}
	if o.pipes == nil {
		o.pipes = splice.NewPipePool(splice.PipePoolConfig{Size: 1 << 20, MaxOpen: 256, MaxIdle: 16})
	}
	h := &harness{t: t, pipes: o.pipes, fronts: map[string]*testFront{}, logs: &logRecorder{}, pipeFDs: countPipeFDs(t)}
	sharedPipes := h.pipes
	if o.noPipes {
		sharedPipes = nil
	}
	h.sh = NewShared(o.max, sharedPipes, slog.New(h.logs))
	rc := reactor.Config{Log: h.sh.Log, Clock: o.clock}
	switch {
	case o.noCoalesce:
	case o.wakeCoalesce > 0:
		rc.WakeCoalesce = o.wakeCoalesce
	default:
		rc.WakeCoalesce = config.DefaultWakeCoalesce
	}
	t.Cleanup(h.finish)
	for i := range o.loops {
		rc.ID = i
		r, err := reactor.New(rc)
		if err != nil {
			t.Fatal(err)
		}
		h.loops = append(h.loops, New(r, h.sh))
	}

	pools := buildPools(t, o.fronts)
	for _, fs := range o.fronts {
		p := pools[fs.name]
		socks, err := listener.Bind(fs.name, "127.0.0.1:0", 0, o.loops)
		if err != nil {
			t.Fatal(err)
		}
		f := &testFront{Front: NewFront(fs.name, p), addr: socks.Addr.String()}
		for i, l := range h.loops {
			if err := l.AddListener(socks.FDs[i], f.Front); err != nil {
				socks.Close()
				t.Fatal(err)
			}
			socks.FDs[i] = -1 // the loop owns it now
		}
		h.fronts[fs.name] = f
	}
	for _, l := range h.loops {
		l.r.Start()
	}
	h.started = true
	return h
}

// buildPools builds a pool per front from a TOML text, as l4lb would
// (config.Parse, then pool.New over one breaker MemoryStore).
func buildPools(t testing.TB, fronts []frontSpec) map[string]*pool.Pool {
	t.Helper()
	var b strings.Builder
	b.WriteString("[admin]\nlisten = \"\"\n")
	for _, f := range fronts {
		fmt.Fprintf(&b, "[[listener]]\nname = %q\nbind = %q\npool = %q\n", f.name, testnet.FreeAddr(t), f.name)
	}
	for _, f := range fronts {
		fmt.Fprintf(&b, "[pool.%s]\nalgorithm = \"round-robin\"\nretries = 0\n%s\n", f.name, f.keys)
		// No health checks (nothing runs the pools), and a breaker that
		// does not trip: these tests are about the loop, not about which
		// backend it may dial.
		fmt.Fprintf(&b, "[pool.%s.health]\nenabled = false\n[pool.%s.breaker]\nfailures = 1000000\n", f.name, f.name)
		for _, a := range f.backends {
			fmt.Fprintf(&b, "[[pool.%s.backend]]\naddr = %q\n", f.name, a)
		}
	}
	cfg, err := config.Parse("loop_test.toml", []byte(b.String()))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", b.String(), err)
	}
	store := breaker.NewMemoryStore(nil)
	pools := map[string]*pool.Pool{}
	for _, fs := range fronts {
		p, err := pool.New(cfg.Pools[fs.name], pool.Deps{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		pools[fs.name] = p
	}
	return pools
}

// finish runs when the test ends, after the test closed its ends.
func (h *harness) finish() {
	t := h.t
	if !h.started {
		for _, l := range h.loops {
			l.r.Discard()
		}
		return
	}
	if !testnet.WaitUntil(20*time.Second, func() bool { return h.sh.Active.Load() == 0 }) {
		t.Errorf("%d connections still open on the loops after the test closed its ends:%s", h.sh.Active.Load(), h.describeConns())
	} else {
		for _, l := range h.loops {
			if n := l.Conns(); n != 0 {
				t.Errorf("loop %d still counts %d connections", l.r.ID(), n)
			}
		}
		if s := h.pipes.Stats(); s.Busy() != 0 {
			t.Errorf("%d pipes still held after every connection closed", s.Busy())
		}
		for name, f := range h.fronts {
			for _, b := range f.Pool().Backends() {
				if n := b.Active(); n != 0 {
					t.Errorf("front %s: backend %s still counts %d active connections", name, b.Addr, n)
				}
			}
		}
	}
	for _, l := range h.loops {
		l.r.Stop()
	}
	for _, l := range h.loops {
		l.r.Wait()
	}
	if s := h.pipes.Stats(); s.Open != 0 {
		t.Errorf("%d pipes left open (%d idle) after the loops stopped", s.Open, s.Idle)
	}
	if n := countPipeFDs(t); n != h.pipeFDs {
		t.Errorf("%d pipe fds open after the loops stopped, %d before the test", n, h.pipeFDs)
	}
}

// on runs f on l's goroutine and waits for it: the way a test looks at
// what a loop owns.
func (h *harness) on(l *Loop, f func()) {
	h.t.Helper()
	done := make(chan struct{})
	l.r.Post(func() { f(); close(done) })
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		h.t.Fatalf("loop %d did not run a task within 20s", l.r.ID())
	}
}

// connState is what a test can see of one connection on a loop.
type connState struct {
	phase   phase
	ended   [2]bool
	pending [2]bool
}

// conns lists the connections of every loop.
func (h *harness) conns() []connState {
	var out []connState
	for _, l := range h.loops {
		h.on(l, func() {
			for c := range l.conns {
				out = append(out, connState{phase: c.phase, ended: c.ended,
					pending: [2]bool{c.streams[0].Pending(), c.streams[1].Pending()}})
			}
		})
	}
	return out
}

func (h *harness) describeConns() string {
	var b strings.Builder
	for _, l := range h.loops {
		done := make(chan struct{})
		var lines []string
		l.r.Post(func() {
			for c := range l.conns {
				lines = append(lines, fmt.Sprintf("\n  loop %d: client %v phase %d ended %v pending %v/%v queued %v",
					l.r.ID(), c.src, c.phase, c.ended, c.streams[0].Pending(), c.streams[1].Pending(), c.queued))
			}
			close(done)
		})
		select {
		case <-done:
			b.WriteString(strings.Join(lines, ""))
		case <-time.After(5 * time.Second):
			fmt.Fprintf(&b, "\n  loop %d: does not answer", l.r.ID())
		}
	}
	return b.String()
}

// timersArmed is the number of timers armed on l.
func (h *harness) timersArmed(l *Loop) int {
	n := 0
	h.on(l, func() { n = l.r.TimersArmed() })
	return n
}

// dial connects a client to front's listener.
func (h *harness) dial(front string) *net.TCPConn {
	h.t.Helper()
	c, err := dialTCP(h.fronts[front].addr)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func dialTCP(addr string) (*net.TCPConn, error) {
	c, err := net.DialTimeout("tcp", addr, 20*time.Second)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// proxied is one connection through a loop: the test holds the client's
// end and the backend's end.
type proxied struct {
	client  *net.TCPConn
	backend *net.TCPConn
}

// open makes one connection through front to the taker k and returns both
// of the test's ends. Connections are opened one at a time, so the next
// one k accepts is this client's.
func (h *harness) open(front string, k *testnet.Taker) *proxied {
	h.t.Helper()
	c := h.dial(front)
	return &proxied{client: c, backend: k.Next(h.t)}
}

// ping proves the path works: 4 bytes from the client reach the backend.
func (p *proxied) ping(t *testing.T) {
	t.Helper()
	p.client.Write([]byte("ping"))
	p.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(p.backend, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
}

func (p *proxied) close() {
	p.client.Close()
	p.backend.Close()
}

// front returns the named front.
func (h *harness) front(name string) *testFront { return h.fronts[name] }

// countPipeFDs counts the process's open pipe fds (splice pipes).
func countPipeFDs(t testing.TB) int {
	t.Helper()
	n := 0
	for _, target := range fdTargets(t) {
		if strings.HasPrefix(target, "pipe:") {
			n++
		}
	}
	return n
}

func countFDs(t testing.TB) int { return len(fdTargets(t)) }

func fdTargets(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out = append(out, target)
		}
	}
	return out
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// readToEnd reads and discards until the connection ends, and returns how
// many bytes came and how it ended: io.EOF for a clean end, else the error
// (ECONNRESET for a reset). A deadline of d bounds the wait.
func readToEnd(c *net.TCPConn, d time.Duration) (int64, error) {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 256<<10)
	var n int64
	for {
		m, err := c.Read(buf)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
}

// mustReset checks that c's stream ends with a reset, never a clean EOF.
func mustReset(t *testing.T, who string, c *net.TCPConn) {
	t.Helper()
	if n, err := readToEnd(c, 20*time.Second); !isReset(err) {
		t.Errorf("%s: stream ended with %v after %d bytes, want a reset (ECONNRESET)", who, err, n)
	}
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// exchange sends payloads both ways at once over one proxied connection,
// each side half-closing when done, and checks that each side received
// exactly what the other sent, then a clean EOF.
func exchange(p *proxied, up, down []byte) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	deadline := time.Now().Add(60 * time.Second)
	p.client.SetDeadline(deadline)
	p.backend.SetDeadline(deadline)
	send := func(c *net.TCPConn, data []byte, who string) {
		defer wg.Done()
		if _, err := c.Write(data); err != nil {
			errs <- fmt.Errorf("%s write: %w", who, err)
			return
		}
		if err := c.CloseWrite(); err != nil {
			errs <- fmt.Errorf("%s half-close: %w", who, err)
		}
	}
	recv := func(c *net.TCPConn, want []byte, who string) {
		defer wg.Done()
		hs := sha256.New()
		n, err := io.Copy(hs, c)
		if err != nil {
			errs <- fmt.Errorf("%s read after %d bytes: %w", who, n, err)
			return
		}
		if n != int64(len(want)) || !bytes.Equal(hs.Sum(nil), sha256Sum(want)) {
			errs <- fmt.Errorf("%s: received %d bytes that differ from the %d sent", who, n, len(want))
		}
	}
	wg.Add(4)
	go send(p.client, up, "client")
	go send(p.backend, down, "backend")
	go recv(p.backend, up, "backend")
	go recv(p.client, down, "client")
	wg.Wait()
	close(errs)
	return <-errs
}

// parallel runs f(0..n-1) on at most width goroutines and returns the
// first error.
func parallel(n, width int, f func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(width, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// setLoopSockopt sets a socket option on the loop's own end of the only
// connection l holds, client side (the accepted socket) or backend side.
func (h *harness) setLoopSockopt(l *Loop, client bool, opt, v int) {
	h.t.Helper()
	var err error = errors.New("no connection on the loop")
	h.on(l, func() {
		for c := range l.conns {
			fd := c.be.fd
			if client {
				fd = c.cl.fd
			}
			err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, v)
		}
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// logRecorder is a slog.Handler that keeps every record (debug included).
type logRecorder struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	lr := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, lr)
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// count counts the records with message msg whose attributes include the
// key/value pairs kv.
func (r *logRecorder) count(msg string, kv ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
next:
	for _, rec := range r.recs {
		if rec.msg != msg {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if rec.attrs[kv[i]] != kv[i+1] {
				continue next
			}
		}
		n++
	}
	return n
}

// exchangeOpen sends up from the client and then down from the backend,
// each read in full by the other side, and leaves the connection open.
func exchangeOpen(p *proxied, up, down []byte) error {
	deadline := time.Now().Add(60 * time.Second)
	p.client.SetDeadline(deadline)
	p.backend.SetDeadline(deadline)
	for _, leg := range []struct {
		from, to *net.TCPConn
		data     []byte
	}{{p.client, p.backend, up}, {p.backend, p.client, down}} {
		werr := make(chan error, 1)
		go func() { _, err := leg.from.Write(leg.data); werr <- err }()
		got := make([]byte, len(leg.data))
		if _, err := io.ReadFull(leg.to, got); err != nil {
			return err
		}
		if err := <-werr; err != nil {
			return err
		}
		if !bytes.Equal(got, leg.data) {
			return errors.New("received bytes differ from sent")
		}
	}
	return nil
}

// hold stops l in a task that blocks until release is called (at most
// once): whatever becomes ready meanwhile waits for the loop's next turn.
func (h *harness) hold(l *Loop) (release func()) {
	h.t.Helper()
	held, done := make(chan struct{}), make(chan struct{})
	l.r.Post(func() { close(held); <-done })
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		h.t.Fatalf("loop %d did not run a task within 20s", l.r.ID())
	}
	var once sync.Once
	release = func() { once.Do(func() { close(done) }) }
	h.t.Cleanup(release)
	return release
}

// skipWithoutForcedBuffers skips a test that needs socket buffers past
// net.core.[rw]mem_max (SO_RCVBUFFORCE, SO_SNDBUFFORCE: CAP_NET_ADMIN) to
// hold a reservoir of bytes, when it cannot have them; other errors fail.
func skipWithoutForcedBuffers(t *testing.T, err error) {
	t.Helper()
	switch {
	case errors.Is(err, unix.EPERM):
		t.Skipf("needs CAP_NET_ADMIN for socket buffers past the sysctl limits: %v", err)
	case err != nil:
		t.Fatal(err)
	}
}
