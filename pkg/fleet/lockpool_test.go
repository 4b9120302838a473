package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Probe locks taken at once on a Sentinel set (SET and WAIT, a blocking
// command) leave no tracked connection behind: the lock's client of its
// own tracks nothing, so a later write is told to a watcher once, not once
// per connection a burst of locks opened.
func TestProbeLockBurstLeavesNoTrackedConnections(t *testing.T) {
	ha := startSentinel(t, nil)
	h := newBareFleet(t)
	a, b := h.store(ha.config, Options{}), h.store(ha.config, Options{})
	const watched = "web/10.0.10.1:80"
	var told atomic.Int64
	defer b.Watch(watched, func() { told.Add(1) })()
	// How often one write is told to b's watcher before any lock.
	toldOf := func(what string, write func() error) int64 {
		t.Helper()
		told.Store(0)
		if _, err := b.Read(context.Background(), watched); err != nil {
			t.Fatal(err)
		}
		if err := write(); err != nil {
			t.Fatal(err)
		}
		testnet.Eventually(t, "b's watcher told of "+what, func() bool { return told.Load() > 0 })
		time.Sleep(300 * time.Millisecond) // copies of the message arrive together
		return told.Load()
	}
	ctx := context.Background()
	before := toldOf("a's disable", func() error { return a.Disable(ctx, watched) })
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := b.AcquireProbe(ctx, fmt.Sprintf("web/10.0.11.%d:80", i), "b", time.Minute); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	clients, err := ha.current.Load().Do("CLIENT", "LIST")
	if err != nil {
		t.Fatal(err)
	}
	tracking := strings.Count(clients, "flags=t")
	after := toldOf("a's enable", func() error { return a.Enable(ctx, watched) })
	if after != before {
		t.Errorf("one write told %d times after 20 probe locks, %d before (%d tracking connections on the master):\n%s", after, before, tracking, clients)
	}
}
