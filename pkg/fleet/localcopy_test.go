package fleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// readRacing runs s.Read(key) and, once Redis has answered the read but
// before the answer reaches the local copy, runs during. It returns what
// the read answered.
type readRacer struct {
	store  atomic.Pointer[Store]
	armed  atomic.Bool
	during func()
}

func (r *readRacer) observe(op string, _ time.Duration, err error) {
	if op == "read" && err == nil && r.armed.CompareAndSwap(true, false) {
		r.during()
	}
}

// A Read that Redis answered before a Disable must not put its answer in
// the local copy after the Disable did: the copy would say enabled, and an
// outage right after would have the instance send clients to a backend an
// operator disabled (rule 5).
func TestReadRacingDisableDoesNotUndoItInTheLocalCopy(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.8.3:80"
	ctx := context.Background()
	r := &readRacer{}
	var derr error
	r.during = func() { derr = r.store.Load().Disable(ctx, key) }
	s := h.store(nil, Options{Observe: r.observe})
	r.store.Store(s)
	if _, err := s.Read(ctx, key); err != nil {
		t.Fatal(err)
	}
	r.armed.Store(true)
	st, err := s.Read(ctx, key)
	if err != nil || derr != nil || r.armed.Load() {
		t.Fatalf("read %+v %v, disable %v, raced %v", st, err, derr, !r.armed.Load())
	}
	if st.Disabled {
		t.Fatalf("the read answered %+v: it was to be answered before the disable", st)
	}
	if local, _ := s.local.Read(ctx, key); !local.Disabled {
		t.Fatalf("local copy %+v after a disable redis accepted: the read from before it went back to enabled", local)
	}
}

// The same for an Enable: the local copy must not go back to disabled.
func TestReadRacingEnableDoesNotUndoItInTheLocalCopy(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.8.4:80"
	ctx := context.Background()
	r := &readRacer{}
	var eerr error
	r.during = func() { eerr = r.store.Load().Enable(ctx, key) }
	s := h.store(nil, Options{Observe: r.observe})
	r.store.Store(s)
	if err := s.Disable(ctx, key); err != nil {
		t.Fatal(err)
	}
	r.armed.Store(true)
	st, err := s.Read(ctx, key)
	if err != nil || eerr != nil || r.armed.Load() {
		t.Fatalf("read %+v %v, enable %v, raced %v", st, err, eerr, !r.armed.Load())
	}
	if !st.Disabled {
		t.Fatalf("the read answered %+v: it was to be answered before the enable", st)
	}
	if local, _ := s.local.Read(ctx, key); local.Disabled {
		t.Fatalf("local copy %+v after an enable redis accepted: the read from before it went back to disabled", local)
	}
}

// Two reads of one key: the one begun later (which saw another instance's
// disable) must not be undone by the one begun earlier and answered
// before it.
func TestEarlierReadDoesNotUndoALaterOneInTheLocalCopy(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.8.5:80"
	ctx := context.Background()
	r := &readRacer{}
	b := h.store(nil, Options{})
	r.during = func() {
		if err := b.Disable(ctx, key); err != nil {
			t.Error(err)
			return
		}
		s := r.store.Load()
		testnet.Eventually(t, "A reads B's disable", func() bool {
			st, err := s.Read(ctx, key)
			return err == nil && st.Disabled
		})
	}
	s := h.store(nil, Options{Observe: r.observe})
	r.store.Store(s)
	if _, err := s.Read(ctx, key); err != nil {
		t.Fatal(err)
	}
	r.armed.Store(true)
	st, err := s.Read(ctx, key)
	if err != nil || st.Disabled || r.armed.Load() {
		t.Fatalf("the earlier read answered %+v %v (raced %v); want enabled, from before B's disable", st, err, !r.armed.Load())
	}
	if local, _ := s.local.Read(ctx, key); !local.Disabled {
		t.Fatalf("local copy %+v: the earlier read undid the later one's disable", local)
	}
}
