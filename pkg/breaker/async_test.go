package breaker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// slowStore is a MemoryStore whose transitions wait for gate (a remote
// store on a slow network) and that counts them and who made them.
type slowStore struct {
	*MemoryStore
	gate    chan struct{} // nil: no wait
	trips   atomic.Int64
	closes  atomic.Int64
	mu      sync.Mutex
	watched map[string]func()
}

func (s *slowStore) wait(ctx context.Context) error {
	if s.gate == nil {
		return nil
	}
	select {
	case <-s.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowStore) Trip(ctx context.Context, key string, seen uint64, cooldown, ttl time.Duration) (State, bool, error) {
	s.trips.Add(1)
	if err := s.wait(ctx); err != nil {
		return State{}, false, err
	}
	return s.MemoryStore.Trip(ctx, key, seen, cooldown, ttl)
}

func (s *slowStore) Close(ctx context.Context, key string, gen uint64) (State, bool, error) {
	s.closes.Add(1)
	if err := s.wait(ctx); err != nil {
		return State{}, false, err
	}
	return s.MemoryStore.Close(ctx, key, gen)
}

func (s *slowStore) Watch(key string, changed func()) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched == nil {
		s.watched = map[string]func(){}
	}
	s.watched[key] = changed
	return func() {
		s.mu.Lock()
		delete(s.watched, key)
		s.mu.Unlock()
	}
}

func (s *slowStore) notify(key string) {
	s.mu.Lock()
	f := s.watched[key]
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func newAsync(t *testing.T, store Store, cfg Config) *Breaker {
	t.Helper()
	b, err := New(testKey, cfg.withDefaults(), store, Options{Async: true, Probe: func(context.Context) Result { return Success }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With Async, Done returns while the Store is still answering the trip it
// decided: the data path never waits on the Store. The trip reaches the
// Store once however many failures follow while it waits, and the
// snapshot opens when the Store has answered.
func TestAsyncDoneNeverWaitsAndTripsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{MemoryStore: NewMemoryStore(nil), gate: make(chan struct{})}
		b := newAsync(t, s, Config{Failures: 3})
		stop := run(b)
		defer stop()
		for range 10 {
			dial(b, KindClient, Failure) // would hang here if Done called the Store
		}
		synctest.Wait()
		if n := s.trips.Load(); n != 1 {
			t.Fatalf("trips sent to the store while the first waits: %d, want 1", n)
		}
		if b.State().Open {
			t.Fatal("snapshot open before the store answered")
		}
		close(s.gate)
		synctest.Wait()
		if st := b.State(); !st.Open || st.Generation != 1 {
			t.Fatalf("after the store answered: %+v, want open at generation 1", st)
		}
		if n := s.trips.Load(); n != 1 {
			t.Fatalf("trips: %d, want 1", n)
		}
	})
}

// A trip the Store could not record (it timed out) is asked for again by
// the next failure of the same generation.
func TestAsyncFailedTripIsRetriedByTheNextFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{MemoryStore: NewMemoryStore(nil), gate: make(chan struct{})}
		b := newAsync(t, s, Config{Failures: 2})
		stop := run(b)
		defer stop()
		dial(b, KindClient, Failure)
		dial(b, KindClient, Failure)
		time.Sleep(storeTimeout + time.Millisecond) // the store never answers: the trip times out
		synctest.Wait()
		if b.State().Open {
			t.Fatal("open without the store")
		}
		close(s.gate)
		dial(b, KindClient, Failure)
		synctest.Wait()
		if n, st := s.trips.Load(), b.State(); n != 2 || !st.Open {
			t.Fatalf("trips %d, state %+v: want a second trip that opens", n, st)
		}
	})
}

// A recovery success closes through Run too, and by the same
// compare-and-delete: a close asked for at a generation another instance
// has moved on from is stale and closes nothing.
func TestAsyncCloseIsMadeAgainstTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{MemoryStore: NewMemoryStore(nil)}
		b := newAsync(t, s, Config{Failures: 1, Cooldown: time.Hour})
		stop := run(b)
		defer stop()
		dial(b, KindClient, Failure)
		synctest.Wait()
		if !b.State().Open {
			t.Fatal("did not trip")
		}
		stale := b.Begin(KindForce) // generation 1
		// Another instance re-opens (generation 2) before the success lands.
		if _, ok, err := s.MemoryStore.Reopen(context.Background(), testKey, 1, time.Hour, time.Hour); !ok || err != nil {
			t.Fatalf("reopen: %v %v", ok, err)
		}
		b.Done(stale, Success)
		synctest.Wait()
		if st, _ := s.Read(context.Background(), testKey); !st.Open || st.Generation != 2 {
			t.Fatalf("store after a stale success: %+v, want open at generation 2", st)
		}
		fresh := b.Begin(KindForce)
		if fresh.Generation != 2 {
			t.Fatalf("snapshot generation %d after the failed close, want 2", fresh.Generation)
		}
		b.Done(fresh, Success)
		synctest.Wait()
		if st := b.State(); st.Open || st.Generation != 3 {
			t.Fatalf("after a fresh success: %+v, want closed at generation 3", st)
		}
	})
}

// A Store that tells of changes made elsewhere gets the snapshot re-read
// at once, not at the next refresh.
func TestNotifierRefreshesTheSnapshotAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{MemoryStore: NewMemoryStore(nil)}
		b, err := New(testKey, Config{}.withDefaults(), s, Options{SnapshotRefresh: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(b)
		synctest.Wait()
		if _, ok, _ := s.MemoryStore.Trip(context.Background(), testKey, 0, time.Minute, time.Minute); !ok {
			t.Fatal("trip elsewhere failed")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if b.State().Open {
			t.Fatal("snapshot changed without a notice or a refresh")
		}
		s.notify(testKey)
		synctest.Wait()
		if !b.State().Open {
			t.Fatal("notice did not refresh the snapshot")
		}
		stop()
		s.mu.Lock()
		left := len(s.watched)
		s.mu.Unlock()
		if left != 0 {
			t.Fatalf("Run left %d watches behind", left)
		}
	})
}
