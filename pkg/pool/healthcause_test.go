package pool_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/health"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A failed health check's cause reaches the backend's health status and
// the pool's log (at debug, once per check, naming the backend), through
// the pool's wrapper that counts the check; a pass clears it.
func TestHealthCheckCause(t *testing.T) {
	r := newRestartable(t) // not started: refused
	cfg := config.DefaultPool("p")
	cfg.Health.Enabled = true
	cfg.Health.Interval, cfg.Health.Timeout, cfg.Health.Rise, cfg.Health.Fall = 20*time.Millisecond, 5*time.Second, 1, 1
	bc := config.DefaultBackend()
	bc.Addr = r.addr
	cfg.Backends = []config.Backend{bc}
	rec := &logRecorder{}
	p, err := pool.New(cfg, pool.Deps{Store: breaker.NewMemoryStore(nil), Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(stop)
	b := p.Backends()[0]

	testnet.Eventually(t, "the refused backend to go health-down", func() bool { return !b.HealthUp() })
	st, ok := b.HealthStatus()
	if !ok || st.LastResult != health.Fail || !strings.Contains(st.LastError, "connection refused") || !strings.Contains(st.LastError, r.addr) {
		t.Fatalf("health status of a refused backend: %+v, ok=%v; want its last error to say it refused", st, ok)
	}
	if errs := rec.errors("health changed"); len(errs) != 1 || !errors.Is(errs[0], syscall.ECONNREFUSED) {
		t.Fatalf("the change to down logged errors %v; want the refusal", errs)
	}

	r.start()
	testnet.Eventually(t, "the backend to come back", func() bool {
		st, _ := b.HealthStatus()
		return b.HealthUp() && st.LastResult == health.Pass
	})
	if st, _ := b.HealthStatus(); st.LastError != "" {
		t.Fatalf("after a pass LastError is %q, want empty", st.LastError)
	}

	// Once stopped, the checks counted as failed health dials and the
	// debug lines match one for one: the check a stop cuts short is
	// counted by the pool, and neither recorded nor logged by the prober.
	stop()
	_, failed := b.Dials(pool.DialHealth)
	logged := rec.errors("health check failed")
	if failed == 0 || int64(len(logged)) > failed || int64(len(logged)) < failed-1 {
		t.Fatalf("%d failed health dials, %d debug lines; want one line per failed check", failed, len(logged))
	}
	for _, err := range logged {
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("debug line with error %v, want the refusal", err)
		}
	}
}
