package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/splice"
)

// lb is an in-process l4lb built from a TOML text.
type lb struct {
	server *Server
	pools  map[string]*pool.Pool
	addr   string // first listener's address
	pipes  *splice.PipePool
	// cuts counts the calls of the pools' CutBackend (a drain's deadline
	// passed with connections still open), each counted before the
	// connections are reset: a reset seen while it is 0 did not come from
	// a deadline.
	cuts atomic.Int64
}

// poolTOML renders one listener on a free port feeding pool "p" with the
// given backends; extra is appended inside [pool.p].
func poolTOML(t *testing.T, algorithm string, backends []string, extra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", testnet.FreeAddr(t))
	fmt.Fprintf(&b, "[pool.p]\nalgorithm = %q\n%s\n", algorithm, extra)
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	return b.String()
}

func startLB(t *testing.T, text string, maxConns int) *lb {
	t.Helper()
	return startLBLogged(t, text, maxConns, nil)
}

// startLBLogged is startLB with the server's log going to log.
func startLBLogged(t *testing.T, text string, maxConns int, log *slog.Logger) *lb {
	t.Helper()
	testnet.CheckLeaks(t) // a no-op if the test already called noLeaks
	cfg, err := config.Parse("test.toml", []byte(text))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", text, err)
	}
	l := &lb{pools: map[string]*pool.Pool{}, pipes: splice.NewPipePool(splice.PipePoolConfig{MaxOpen: 64, MaxIdle: 8})}
	store := breaker.NewMemoryStore(nil)
	for _, name := range cfg.PoolNames {
		// A drain's deadline cuts through the server, as cmd/l4lb wires it
		// (the server is made after the pools; a cut comes later still).
		cut := func(b *pool.Backend) {
			l.cuts.Add(1)
			if l.server != nil {
				l.server.CutBackend(b)
			}
		}
		p, err := pool.New(cfg.Pools[name], pool.Deps{Store: store, BreakerRefresh: 20 * time.Millisecond, CutBackend: cut})
		if err != nil {
			t.Fatal(err)
		}
		l.pools[name] = p
	}
	if maxConns == 0 {
		maxConns = 1000
	}
	l.server, err = New(Config{Frontends: l.frontends(t, cfg), Loops: 2, MaxConnections: maxConns, Pipes: l.pipes, WakeCoalesce: cfg.Global.WakeCoalesce, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
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

// frontends are cfg's listeners over l's pools, built as cmd/l4lb builds
// them (Frontends), for startLB and for a reload to a new text.
func (l *lb) frontends(t *testing.T, cfg *config.Config) []Frontend {
	t.Helper()
	pols := map[string]*relay.Policy{}
	for _, lc := range cfg.Listeners {
		pols[lc.Name] = listenerPolicy(lc)
	}
	fronts, err := Frontends(cfg, l.pools, pols)
	if err != nil {
		t.Fatal(err)
	}
	return fronts
}

func (l *lb) listener(name string) ListenerStats {
	for _, s := range l.server.Stats() {
		if s.Name == name {
			return s
		}
	}
	return ListenerStats{}
}

// closedAddr is an address on which nothing listens: dials are refused.
func closedAddr(t *testing.T) string { return testnet.FreeAddr(t) }

// noLeaks checks, when the test ends, that every goroutine and fd started
// since is gone (testnet.CheckLeaks). Call it first, before the backends:
// startLB checks too, but a check begun there runs before the cleanups
// registered earlier.
func noLeaks(t *testing.T) {
	t.Helper()
	testnet.CheckLeaks(t)
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

// waitDialing waits until backend b counts n connections (a dial takes
// its slot before connect(2)) and l's loops have finished the turn that
// issued them: for a backend that never answers a SYN, n dials are then
// in flight. It stands for a sleep "long enough for the dial to begin".
func waitDialing(t *testing.T, l *lb, b *pool.Backend, n int64) {
	t.Helper()
	testnet.Eventually(t, fmt.Sprintf("%d dials to %s in flight", n, b.Addr), func() bool { return b.Active() == n })
	l.barrier()
}
