package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name      string
		usec, pid string
		want      time.Duration
		err       bool
	}{
		{name: "no watchdog"},
		{name: "half the period", usec: "30000000", want: 15 * time.Second},
		{name: "for this process", usec: "30000000", pid: self, want: 15 * time.Second},
		{name: "for another process", usec: "30000000", pid: strconv.Itoa(os.Getpid() + 1)},
		{name: "odd microseconds round down", usec: "3", want: time.Microsecond},
		{name: "not a number", usec: "30s", err: true},
		{name: "zero", usec: "0", err: true},
		{name: "beyond a duration", usec: "18446744073709551615", err: true},
		{name: "pid not a number", usec: "30000000", pid: "main", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			got, err := WatchdogInterval()
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("WatchdogInterval() = %v, %v; want %v (error: %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

// check is a liveness check a test turns off and on: while stuck it
// blocks until its deadline, as a wedged event loop does.
type check struct {
	stuck  atomic.Bool
	mu     sync.Mutex
	misses int
}

func (c *check) alive(ctx context.Context) error {
	if !c.stuck.Load() {
		return nil
	}
	<-ctx.Done()
	c.mu.Lock()
	c.misses++
	c.mu.Unlock()
	return fmt.Errorf("stuck: %w", ctx.Err())
}

func (c *check) missed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.misses
}

func isPing(n testnet.Notification) bool { return n.Has("WATCHDOG", "1") }

func TestWatchdogPingsOnlyWhileTheCheckPasses(t *testing.T) {
	f := fake(t)
	c := &check{}
	var reported atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunWatchdog(ctx, 10*time.Millisecond, c.alive, func(err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("reported %v, want the check's deadline", err)
			}
			reported.Add(1)
		})
	}()
	defer func() { cancel(); <-done }()

	f.WaitFor(t, "a ping while the check passes", isPing)
	c.stuck.Store(true)
	// The first miss comes from a check that began after stuck was set:
	// any ping sent before it is already queued (unixgram), so drain them.
	testnet.Eventually(t, "a missed check", func() bool { return c.missed() >= 1 })
	f.Pending(t)
	first := c.missed()
	testnet.Eventually(t, "two more missed checks", func() bool { return c.missed() >= first+2 })
	for _, n := range f.Pending(t) {
		t.Fatalf("got %q while every check failed, want no ping", n.Raw)
	}
	if reported.Load() < int64(first+2) {
		t.Fatalf("%d failures reported for %d misses", reported.Load(), c.missed())
	}
	c.stuck.Store(false)
	f.WaitFor(t, "pings again once the check passes", isPing)
}

func TestWatchdogStopsWithItsContext(t *testing.T) {
	fake(t)
	c := &check{}
	c.stuck.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// An hour: only the cancel can end the check.
		RunWatchdog(ctx, time.Hour, c.alive, func(err error) { t.Errorf("reported %v while stopping", err) })
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("RunWatchdog did not return after its context ended")
	}
}
