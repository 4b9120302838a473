package server

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A backend that is l4lb's own listener (an address check cannot always
// know: an interface address added later, say) would make one client open
// connections in a loop until the cap. The run-time check sees its own
// dial arrive as a client and resets it.
func TestConnectionLoopIsCutAtRunTime(t *testing.T) {
	noLeaks(t)
	bind := testnet.FreeAddr(t)
	text := poolTOML(t, "round-robin", []string{"127.0.0.1:1"}, "retries = 0\n[pool.p.health]\nenabled = false\n")
	cfg, err := config.Parse("loop.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners[0].Bind = bind
	cfg.Pools["p"].Backends[0].Addr = bind // past the config checks on purpose
	p, err := pool.New(cfg.Pools["p"], pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Frontends: []Frontend{{Name: "front", Bind: bind, Pool: p}}, Loops: 1, MaxConnections: 1000})
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})

	// The client's only backend is l4lb itself: its connection is reset,
	// on loopback often before its own connect has returned.
	if c, err := net.DialTimeout("tcp", bind, 5*time.Second); err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); err != nil && !isReset(err) {
			t.Fatalf("client read: %v, want its connection ended", err)
		}
	} else if !isReset(err) {
		t.Fatalf("client dial: %v, want it to connect or be reset", err)
	}
	testnet.Eventually(t, "the loop to be cut and every connection closed", func() bool { return s.Active() == 0 })
	st := s.Stats()[0]
	if st.Loops == 0 {
		t.Fatalf("no loop detected: %+v", st)
	}
	if n := st.OK + st.Failed + st.Rejected; n > 10 {
		t.Fatalf("one client made l4lb accept %d connections: the loop ran on (%+v)", n, st)
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
