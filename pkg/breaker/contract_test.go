package breaker_test

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/breaker/storetest"
	"github.com/l4lb/l4lb/pkg/clock"
)

// The Store contract, on a MemoryStore whose TTL clock is a fake one.
func TestMemoryStore_Contract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		return storetest.Harness{Store: breaker.NewMemoryStore(c), Elapse: c.Advance}
	})
}
