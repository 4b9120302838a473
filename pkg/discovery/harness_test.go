package discovery

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// patience is how long a test waits for the watcher to act: generous,
// for a loaded machine; a passing test never waits it out.
const patience = 30 * time.Second

// harness runs one Watcher on a Fake clock: each lookup's wait comes out
// of waits once its timer is armed, each reported set out of sets.
type harness struct {
	t       *testing.T
	clk     *clock.Fake
	w       *Watcher
	sets    chan Set
	waits   chan time.Duration
	log     *lockedBuffer
	metrics *Metrics
}

// run starts a watcher of spec on a Fake clock; it is stopped, and the
// test leak-checked, when the test ends.
func run(t *testing.T, spec Spec) *harness {
	t.Helper()
	return runFrom(t, spec, nil)
}

// runFrom is run of a watcher started from initial (Options.Initial).
func runFrom(t *testing.T, spec Spec, initial []Backend) *harness {
	t.Helper()
	testnet.CheckLeaks(t)
	h := &harness{t: t, clk: clock.NewFake(epoch), sets: make(chan Set, 100), waits: make(chan time.Duration, 100), log: &lockedBuffer{}}
	var err error
	if h.metrics, err = NewMetrics(nil); err != nil {
		t.Fatal(err)
	}
	h.w, err = NewWatcher(spec, Options{
		Pool: "web", Clock: h.clk, Metrics: h.metrics,
		Log:      slogTo(h.log),
		OnChange: func(s Set) { h.sets <- s },
		Initial:  initial,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	h.w.onWait = func(d time.Duration) {
		select {
		case h.waits <- d:
		case <-stopped:
		}
	}
	goRun(t, h.w)
	t.Cleanup(func() { close(stopped) }) // before goRun's: a wait handed over unblocks
	return h
}

// goRun runs w.Run on a goroutine of its own until stop (or the test's
// end); stop reports whether Run returned within patience of its
// context's end.
func goRun(t *testing.T, w *Watcher) (stop func() bool) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	var once sync.Once
	returned := false
	stop = func() bool {
		once.Do(func() {
			cancel()
			select {
			case <-done:
				returned = true
			case <-time.After(patience):
			}
		})
		return returned
	}
	t.Cleanup(func() {
		if !stop() {
			t.Errorf("Run did not return within %v of its context's end", patience)
		}
	})
	return stop
}

// wait is the length of the wait after the next lookup: it returns once
// that lookup has been applied and its timer armed.
func (h *harness) wait() time.Duration {
	h.t.Helper()
	select {
	case d := <-h.waits:
		return d
	case <-time.After(patience):
		h.t.Fatalf("no lookup ended within %v; log:\n%s", patience, h.log)
		return 0
	}
}

// step moves the clock by the wait it was given and returns the next
// one: one more lookup.
func (h *harness) step(d time.Duration) time.Duration {
	h.t.Helper()
	h.clk.Advance(d)
	return h.wait()
}

// reported is the set OnChange was given since the last call, if any;
// call it after wait (OnChange runs before the wait is armed).
func (h *harness) reported() (Set, bool) {
	h.t.Helper()
	select {
	case s := <-h.sets:
		select {
		case s2 := <-h.sets:
			h.t.Fatalf("two sets reported after one lookup: %v then %v", s, s2)
		default:
		}
		return s, true
	default:
		return Set{}, false
	}
}

// mustReport fails unless OnChange was given a set with exactly want.
func (h *harness) mustReport(want ...Backend) Set {
	h.t.Helper()
	s, ok := h.reported()
	if !ok {
		h.t.Fatalf("no set reported; want %v; log:\n%s", want, h.log)
	}
	if !slices.Equal(s.Backends, want) {
		h.t.Fatalf("reported %v, want %v", s.Backends, want)
	}
	return s
}

// mustNotReport fails if OnChange was called.
func (h *harness) mustNotReport() {
	h.t.Helper()
	if s, ok := h.reported(); ok {
		h.t.Fatalf("reported %v: the set did not change", s.Backends)
	}
}

// be is a backend from A/AAAA records of name.
func be(addr, name string) Backend {
	return Backend{Addr: netip.MustParseAddrPort(addr), Weight: 1, Target: name}
}

// lockedBuffer is a log sink several goroutines may write.
type lockedBuffer struct{ testnet.LogBuffer }

// expect fails t unless n log lines have a message beginning with
// prefix (a text handler quotes a message with spaces).
func (b *lockedBuffer) expect(t *testing.T, prefix string, n int) {
	t.Helper()
	if got := strings.Count(b.String(), `msg="`+prefix); got != n {
		t.Fatalf("%d log lines begin %q, want %d; log:\n%s", got, prefix, n, b)
	}
}

// slogTo is a text logger writing to b.
func slogTo(b *lockedBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
