package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A watcher's callback runs with none of the Store's locks held: it may
// take a lock of its own under which it watches or stops watching keys
// (the drains' follower does, from start, reloads and shutdown), and
// called under the watchers' lock that order was the other way round: a
// deadlock on rueidis' reading goroutine, after which no reply was read.
// Here the callback watches a key itself, which under that lock could
// never return.
func TestWatchCallbackMayWatch(t *testing.T) {
	h := newFleet(t)
	a, b := h.store(nil, Options{}), h.store(nil, Options{})
	const key = "web/10.0.9.1:80"
	var mu sync.Mutex
	var stops []func()
	var told atomic.Int64
	stop := b.Watch(key, func() {
		mu.Lock()
		defer mu.Unlock()
		stops = append(stops, b.Watch("web/10.0.9.2:80", func() {}))
		told.Add(1)
	})
	t.Cleanup(func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		for _, s := range stops {
			s()
		}
	})
	// b caches the key's read, so that a's write is told to it.
	if _, err := b.Read(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Trip(context.Background(), key, 0, time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "b's watcher, which watches a key itself, to be told", func() bool { return told.Load() > 0 })
	// b still reads: its client's reading goroutine is not stuck.
	if st, err := b.Read(context.Background(), key); err != nil || !st.Open {
		t.Fatalf("b reads %+v, %v after the callback: want the trip", st, err)
	}
}
