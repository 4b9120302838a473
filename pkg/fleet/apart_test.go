package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// apartStores are an instance's Store reaching Redis through a proxy the test
// cuts, and a second instance's, connected directly.
func apartStores(t *testing.T, opts Options) (h *fleetHarness, p *cutProxy, a, b *Store) {
	t.Helper()
	h = newFleet(t)
	p = startProxy(t, h.srv.Addr)
	a = h.store(func(c *Config) {
		c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, time.Hour
	}, opts)
	b = h.store(nil, Options{})
	return h, p, a, b
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
