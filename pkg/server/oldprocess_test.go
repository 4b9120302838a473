package server

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
	"github.com/l4lb/l4lb/pkg/relay"
)

// What new clients count beside Active (relay.Cap.Elsewhere): the old
// process's connections only while max_connections is set in the file,
// not while it is derived from the fd limit (the old process's
// connections hold its own fds); adopted queued clients either way. A
// reload switching between the two (setCap, as Reload) applies at once.
// Holding, what the next process is told, counts the old process's
// connections either way (its own cap may be set).
func TestCapFromTheFDLimitLeavesThePreviousProcessOut(t *testing.T) {
	s, err := New(Config{MaxConnections: 10, Loops: 1, MaxConnectionsDerived: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	counted := func(want int64, when string) {
		t.Helper()
		if got := s.sh.Cap().Elsewhere; got != want {
			t.Fatalf("%s: new clients count %d beside their own, want %d", when, got, want)
		}
	}
	s.HeldElsewhere(5)
	counted(0, "derived cap, 5 held by the old process")
	if got := s.Holding(); got != 5 {
		t.Fatalf("holding %d, want the old process's 5 for the next one", got)
	}
	s.setCap(ConnCap{MaxConnections: 10}) // a reload to max_connections = 10
	counted(5, "set cap")
	s.holdQueued(2)
	counted(7, "set cap, 2 adopted queued clients")
	s.setCap(ConnCap{MaxConnections: 10, Derived: true}) // a reload back to max_connections = 0
	counted(2, "derived cap, 2 adopted queued clients")
	s.holdQueued(-2)
	counted(0, "derived cap, the queued clients gone")
	if got := s.Holding(); got != 5 {
		t.Fatalf("holding %d, want 5", got)
	}
}

// An old process upgraded in turn waits, before it exits, until the
// process before it holds nothing (its successor counts those through
// it), or until its drain's deadline.
func TestAwaitOldProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Server{sh: relay.NewShared(10, nil, nil)}
		if err := s.AwaitOldProcess(t.Context()); err != nil {
			t.Fatalf("nothing held elsewhere: %v", err)
		}
		s.HeldElsewhere(3)
		done := make(chan error, 1)
		go func() { done <- s.AwaitOldProcess(t.Context()) }()
		s.HeldElsewhere(1)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("returned (%v) with 1 still held elsewhere", err)
		default:
		}
		s.HeldElsewhere(0)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("still waiting with none held elsewhere")
		}

		s.HeldElsewhere(2)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := s.AwaitOldProcess(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("at the deadline with 2 held: %v", err)
		}
	})
}

// A hand-over's connections count here once run returns, as the old
// process's count is lowered right after it: the relay in Active, the
// queued client (held until FlowsDone) beside it; after FlowsDone both
// in Active. Neither is counted nowhere meanwhile.
func TestAdoptedConnectionsCountOnceRunReturns(t *testing.T) {
	noLeaks(t)
	a := testnet.StartBackend(t, "A", "")
	old := startLB(t, policyTOML(t, "", "", "round-robin", `queue_timeout = "30s"`, beSpec{addr: a.Addr, maxConns: 1}), 0)
	next := startLB(t, policyTOML(t, "", "", "round-robin", `queue_timeout = "30s"`, beSpec{addr: a.Addr, maxConns: 1}), 0)
	c1 := dialFrom(t, "127.0.0.1", old.addr)
	servedBy(t, c1)
	c2 := dialFrom(t, "127.0.0.1", old.addr) // queued: the backend's one slot is c1's
	b := &flow.Batch{}
	testnet.Eventually(t, "the relay and the queued client detached", func() bool {
		old.server.DetachFlows(b)
		return len(b.Relays) == 1 && len(b.Queued) == 1
	})
	handTo(t, next, b)
	if got, active := next.server.Holding(), next.server.Active(); got != 2 || active != 1 {
		t.Fatalf("once run returned: holding %d (%d active), want 2 (1 active, 1 queued)", got, active)
	}
	next.server.FlowsDone()
	if got, active := next.server.Holding(), next.server.Active(); got != 2 || active != 2 {
		t.Fatalf("after FlowsDone: holding %d (%d active), want 2, both active", got, active)
	}
	if got := next.server.sh.Cap().Elsewhere; got != 0 {
		t.Fatalf("after FlowsDone new clients still count %d beside Active", got)
	}
	c1.Close() // its slot is the queued client's
	servedBy(t, c2)
	c2.Close()
}
