package breaker_test

import (
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/breaker/storetest"
)

// clock is a store clock that moves only when told, safe for the suite's
// racing goroutines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) elapse(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The Store contract, on a MemoryStore whose TTL clock is a fake one.
func TestMemoryStore_Contract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		return storetest.Harness{Store: breaker.NewMemoryStore(c.now), Elapse: c.elapse}
	})
}
