package pool_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
	"github.com/l4lb/l4lb/pkg/splice"
)

// The pool's tests that need dials run them on the real data path: a pool
// behind server.Server (its event loops dial with Plan, BeginDial, EndDial
// and Pending), real client sockets to its listener and real backends.

// poolTOML renders listener "l" on a free port feeding pool "p" over
// backends, with extra lines inside [pool.p].
func poolTOML(t testing.TB, backends []string, extra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[[listener]]\nname = \"l\"\nbind = %q\npool = \"p\"\n[pool.p]\n%s\n", testnet.FreeAddr(t), extra)
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	return b.String()
}

func parse(t testing.TB, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(text))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", text, err)
	}
	return cfg
}

// newPool builds pool "p" over backends from TOML lines that go inside
// [pool.p] (extra) and runs it (breakers, health checks) until the test
// ends. Nothing dials for clients: for tests of the pool alone.
func newPool(t *testing.T, backends []string, extra string) *pool.Pool {
	t.Helper()
	return newPoolOn(t, nil, backends, extra)
}

// newPoolOn is newPool with the pool, its breakers, health checks and
// their Store on clk (nil: the system clock).
func newPoolOn(t *testing.T, clk clock.Clock, backends []string, extra string) *pool.Pool {
	t.Helper()
	// When the test ends, every goroutine and fd started from here on must
	// be gone: health checks, probes, dials, relays, loops.
	testnet.CheckLeaks(t)
	return runPoolOn(t, clk, parse(t, poolTOML(t, backends, extra)))
}

func runPool(t *testing.T, cfg *config.Config) *pool.Pool {
	t.Helper()
	return runPoolOn(t, nil, cfg)
}

func runPoolOn(t *testing.T, clk clock.Clock, cfg *config.Config) *pool.Pool {
	t.Helper()
	return runPoolDeps(t, cfg, pool.Deps{Store: breaker.NewMemoryStore(clk), Clock: clk, BreakerRefresh: 20 * time.Millisecond})
}

func runPoolDeps(t *testing.T, cfg *config.Config, deps pool.Deps) *pool.Pool {
	t.Helper()
	p, err := pool.New(cfg.Pools["p"], deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return p
}

// reloads returns build, which makes pool "p" from a TOML text as a
// reload does: prev is the pool it replaces (nil: the first), store the
// breaker Store they share. The pools do not run.
func reloads(t *testing.T, store breaker.Store) (build func(text string, prev *pool.Pool) *pool.Pool) {
	return func(text string, prev *pool.Pool) *pool.Pool {
		t.Helper()
		p, err := pool.New(parse(t, text).Pools["p"], pool.Deps{Store: store, Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// lb is pool "p" with the data path in front of it, as l4lb runs it.
type lb struct {
	*pool.Pool
	server *server.Server
	addr   string // the listener's address
	logs   *logRecorder
}

// newLB is newPool served by a server.Server with two event loops (two
// SO_REUSEPORT sockets on the listener), until the test ends.
func newLB(t *testing.T, backends []string, extra string) *lb {
	t.Helper()
	return newLBOn(t, nil, backends, extra)
}

// newLBOn is newLB with the pool, its breakers, health checks and their
// Store on clk (nil: the system clock); the event loops keep the system
// clock, so connect timeouts are real.
func newLBOn(t *testing.T, clk clock.Clock, backends []string, extra string) *lb {
	t.Helper()
	testnet.CheckLeaks(t)
	cfg := parse(t, poolTOML(t, backends, extra))
	p := runPoolOn(t, clk, cfg)
	pipes := splice.NewPipePool(splice.PipePoolConfig{MaxOpen: 64, MaxIdle: 8})
	logs := &logRecorder{}
	lc := cfg.Listeners[0]
	s, err := server.New(server.Config{
		Frontends:      []server.Frontend{{Name: lc.Name, Bind: lc.Bind, Pool: p}},
		Loops:          2,
		MaxConnections: 1000,
		Pipes:          pipes,
		Logger:         slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	addr, err := s.Addr(lc.Name)
	if err != nil {
		t.Fatal(err)
	}
	return &lb{Pool: p, server: s, addr: addr.String(), logs: logs}
}

// stats are the listener's client counters.
func (l *lb) stats() server.ListenerStats { return l.server.Stats()[0] }

// dial opens a client connection to the listener.
func (l *lb) dial(t *testing.T) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", l.addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

// connect is one client through l4lb: it reads the first line its backend
// sends (backends here send their address, or a tag), closes, and returns
// once l4lb has closed that connection too, so the backend's count is
// back. It returns the line, or "" when the client was turned away.
func connect(t *testing.T, l *lb) string {
	t.Helper()
	before := l.server.Active()
	c := l.dial(t)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if isTimeout(err) {
		t.Fatal("a client waited 30s for l4lb: neither served nor turned away")
	}
	testnet.Eventually(t, "l4lb to close the client's connection", func() bool { return l.server.Active() <= before })
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(line, "\n")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// readToEnd reads what the client gets until l4lb ends the connection and
// returns how it ended (nil: a clean close).
func readToEnd(t *testing.T, c *net.TCPConn) error {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if isTimeout(err) {
		t.Fatal("l4lb did not end the client's connection within 30s")
	}
	return err
}

// idle waits until l4lb holds no client connection: every relay has ended
// and every dial result is recorded.
func (l *lb) idle(t *testing.T) {
	t.Helper()
	testnet.Eventually(t, "l4lb to close every connection", func() bool { return l.server.Active() == 0 })
}

func dials(p *pool.Pool, addr string, k pool.DialKind) (success, failure int64) {
	b, _ := p.Backend(addr)
	return b.Dials(k)
}

// startBackend is an echo backend (testnet.StartBackend) whose first line
// is its own address, so connect names the backend a client reached.
func startBackend(t *testing.T) *testnet.Backend {
	t.Helper()
	addr := testnet.FreeAddr(t)
	return testnet.StartBackend(t, addr, addr)
}

// restartable is a backend whose listener can be stopped and started on the
// same port. It sends its address and closes each connection.
type restartable struct {
	t    *testing.T
	addr string
	ln   net.Listener
	mu   sync.Mutex
	seen int
	wg   sync.WaitGroup
}

func newRestartable(t *testing.T) *restartable {
	t.Helper()
	// First: its listener is started and stopped during the test, and
	// the stop registered below must run before the leak check.
	testnet.CheckLeaks(t)
	r := &restartable{t: t, addr: testnet.FreeAddr(t)}
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.seen++
			r.mu.Unlock()
			c.Write([]byte(r.addr + "\n"))
			c.Close()
		}
	})
}

func (r *restartable) stop() {
	r.mu.Lock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *restartable) accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// logRecorder is a slog.Handler that keeps every record, so a test can
// look at the error the data path logged for a client.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// errors returns the "error" attributes of the records with message msg.
func (h *logRecorder) errors(msg string) []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []error
	for _, r := range h.records {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
				out = append(out, err)
			}
			return true
		})
	}
	return out
}

// messages returns the attributes, as text, of the records with message
// msg.
func (h *logRecorder) messages(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, attrs)
	}
	return out
}
