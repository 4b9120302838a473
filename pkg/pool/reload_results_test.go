package pool_test

import (
	"context"
	"sync"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A fleet's pools (Deps.RemoteStore: Async breakers, as in Redis mode; the
// MemoryStore takes the same path) reloaded as cmd/l4lb reloads them: the
// new pool built from the old, the old handed over, the new one run and
// the old one stopped. Dials made before the reload end after it.
type reloadFixture struct {
	t     *testing.T
	store breaker.Store
	wg    sync.WaitGroup
}

func newReloadFixture(t *testing.T) *reloadFixture {
	f := &reloadFixture{t: t, store: breaker.NewMemoryStore(nil)}
	t.Cleanup(f.wg.Wait)
	return f
}

// start builds pool "p" over addrs after prev (nil: the first), hands prev
// over to it and runs it; prev's Run has returned when start returns.
func (f *reloadFixture) start(addrs []string, extra string, prev *pool.Pool, stopPrev context.CancelFunc) (*pool.Pool, context.CancelFunc) {
	f.t.Helper()
	p, err := pool.New(parse(f.t, poolTOML(f.t, addrs, extra)).Pools["p"],
		pool.Deps{Store: f.store, RemoteStore: true, Previous: prev})
	if err != nil {
		f.t.Fatal(err)
	}
	if prev != nil {
		prev.HandOver(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	f.wg.Go(func() {
		defer close(done)
		p.Run(ctx)
	})
	f.t.Cleanup(cancel)
	stop := func() {
		cancel()
		<-done
	}
	if stopPrev != nil {
		stopPrev()
	}
	return p, stop
}

const reloadExtra = "[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 2\nwindow = \"1h\"\ncooldown = \"1h\"\nmax_cooldown = \"1h\"\ncount_early_reset = true\n"

// Failures of connections dialed before a reload that end after it still
// trip the backend's breaker: a connect's failure and an early reset's
// settlement, both reported to breakers whose Run has stopped.
func TestResultsAfterAReloadReachTheSuccessor(t *testing.T) {
	f := newReloadFixture(t)
	addrs := []string{testnet.FreeAddr(t)}
	old, stopOld := f.start(addrs, reloadExtra, nil, nil)
	b := old.Backends()[0]
	failed := old.BeginDial(b, false)
	settle := old.Pending(old.BeginDial(b, false)) // connected; judged by the backend's first move

	next, _ := f.start(addrs, reloadExtra, old, stopOld)
	old.EndDial(failed, dialer.Failure)
	settle.Settle(dialer.Failure) // reset before its first byte

	nb := next.Backends()[0]
	testnet.Eventually(t, "two failures of dials from before the reload trip the breaker", func() bool {
		return nb.Breaker().Open
	})
	if got := nb.Breaker().Generation; got != 1 {
		t.Errorf("generation %d after one trip, want 1", got)
	}
	if got := nb.Trips(); got != 1 {
		t.Errorf("%d trips counted, want 1", got)
	}
}

// The generation rule holds across the reload: a dial from before the
// trip that succeeds after the reload is stale and leaves the breaker
// open; a force-try of the open generation, dialed before the reload, is
// post-trip evidence and closes it.
func TestResultsAfterAReloadKeepTheGenerationRule(t *testing.T) {
	f := newReloadFixture(t)
	addrs := []string{testnet.FreeAddr(t)}
	old, stopOld := f.start(addrs, reloadExtra, nil, nil)
	b := old.Backends()[0]
	preTrip := old.BeginDial(b, false)
	old.EndDial(old.BeginDial(b, false), dialer.Failure)
	old.EndDial(old.BeginDial(b, false), dialer.Failure)
	testnet.Eventually(t, "the breaker trips before the reload", func() bool { return b.Breaker().Open })
	open := b.Breaker().Generation
	force := old.BeginDial(b, true)

	next, _ := f.start(addrs, reloadExtra, old, stopOld)
	nb := next.Backends()[0]
	stale := nb.StaleResults()
	old.EndDial(preTrip, dialer.Success)
	if got := nb.StaleResults(); got != stale+1 {
		t.Errorf("the pre-trip success counted %d stale results, want 1", got-stale)
	}
	if st := nb.Breaker(); !st.Open || st.Generation != open {
		t.Fatalf("after a pre-trip dial succeeded: %+v, want still open at generation %d", st, open)
	}

	old.EndDial(force, dialer.Success)
	testnet.Eventually(t, "the force-try's success closes the breaker", func() bool {
		return !nb.Breaker().Open
	})
	if got := nb.Breaker().Generation; got != open+1 {
		t.Errorf("closed at generation %d, want %d (one close, by the force-try)", got, open+1)
	}
}

// A backend the reload removed has no successor: what its last dials ask
// of its stopped breaker is dropped, and counted.
func TestResultsOfARemovedBackendAreCountedDropped(t *testing.T) {
	f := newReloadFixture(t)
	keep, gone := testnet.FreeAddr(t), testnet.FreeAddr(t)
	old, stopOld := f.start([]string{keep, gone}, reloadExtra, nil, nil)
	b := old.Backends()[1]
	d1, d2 := old.BeginDial(b, false), old.BeginDial(b, false)

	f.start([]string{keep}, reloadExtra, old, stopOld)
	old.EndDial(d1, dialer.Failure)
	old.EndDial(d2, dialer.Failure) // the trip it asks for has no Run to make it
	if got := b.DroppedResults(); got != 1 {
		t.Errorf("%d dropped transitions counted, want 1 (the trip)", got)
	}
}
