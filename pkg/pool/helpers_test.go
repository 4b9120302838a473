package pool

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
)

// newPool builds pool "p" over backends from TOML lines that go inside
// [pool.p] (extra) and runs it until the test ends.
func newPool(t *testing.T, backends []string, extra string) *Pool {
	t.Helper()
	// When the test ends, every goroutine and fd started from here on must
	// be gone: health checks, probes, dials, relays.
	testnet.CheckLeaks(t)
	var b strings.Builder
	fmt.Fprintf(&b, "[[listener]]\nname = \"l\"\nbind = %q\npool = \"p\"\n[pool.p]\n%s\n", testnet.FreeAddr(t), extra)
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	cfg, err := config.Parse("t.toml", []byte(b.String()))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", b.String(), err)
	}
	p, err := New(cfg.Pools["p"], Deps{Store: breaker.NewMemoryStore(nil), BreakerRefresh: 20 * time.Millisecond})
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

var client = netip.MustParseAddrPort("127.0.0.1:40000")

// connect asks the pool for a backend as a client would and closes what it
// got; it returns the backend's address ("" when none could be had).
func connect(t *testing.T, p *Pool) string {
	t.Helper()
	up, err := p.Connect(context.Background(), client, nil)
	if err != nil {
		return ""
	}
	up.Release()
	return up.Backend.Addr
}

func dials(p *Pool, addr string, k DialKind) (success, failure int64) {
	b, _ := p.Backend(addr)
	return b.Dials(k)
}

// restartable is a backend whose listener can be stopped and started on the
// same port.
type restartable struct {
	t    *testing.T
	addr string
	ln   net.Listener
	mu   sync.Mutex
	seen int
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
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.seen++
			r.mu.Unlock()
			c.Close()
		}
	}()
}

func (r *restartable) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
}

func (r *restartable) accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}
