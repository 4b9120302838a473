package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
)

// apartStores are an instance's Store reaching Redis through a proxy the test
// cuts, and a second instance's, connected directly. A's Run is on a fake
// clock (unless opts has a clock): it tries to rejoin when the test waits
// for it (rejoined), without the test waiting for its next try.
func apartStores(t *testing.T, opts Options) (h *fleetHarness, p *cutProxy, a, b *Store) {
	t.Helper()
	h = newFleet(t)
	p = startProxy(t, h.srv.Addr)
	if opts.Clock == nil {
		opts.Clock = clock.NewFake(time.Now())
	}
	a = h.store(func(c *Config) {
		c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, time.Hour
	}, opts)
	b = h.store(nil, Options{})
	return h, p, a, b
}

// rejoined waits until s is on Redis. A Store on a fake clock has it moved
// on by a rejoin interval at each poll, so Run tries again at once.
func rejoined(t testing.TB, s *Store, what string) {
	t.Helper()
	if clk, ok := s.clock.(*clock.Fake); ok {
		testnet.EventuallyOn(t, clk, rejoinEvery, what, s.Up)
		return
	}
	testnet.Eventually(t, what, s.Up)
}

// pastTheLoss waits until each store has taken in that Redis lost the
// fleet's data (it holds the marker Redis holds now) and is on Redis
// again, its copies merged back. Until then a store that has not looked
// yet may still leave Redis to merge, under the test's next write. Each
// poll kicks Run to look, as a watcher told of the flush would.
func pastTheLoss(t testing.TB, h *fleetHarness, stores ...*Store) {
	t.Helper()
	for _, s := range stores {
		testnet.Eventually(t, "a store takes in the loss and rejoins", func() bool {
			select {
			case s.kick <- struct{}{}:
			default:
			}
			marker, err := h.srv.Do("GET", testPrefix+"fleet")
			epoch, _ := s.epoch.Load().(string)
			return err == nil && epoch == marker && s.Up() // a token is hex, never "(nil)"
		})
	}
}

// cutOff cuts a's proxy and waits until a decides locally.
func cutOff(t *testing.T, p *cutProxy, a *Store, key string) {
	t.Helper()
	p.Cut()
	testnet.Eventually(t, "A decides locally", func() bool {
		_, _ = a.Read(context.Background(), key)
		return !a.Up()
	})
}
