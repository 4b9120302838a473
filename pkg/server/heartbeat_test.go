package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/sdnotify"
)

// wedge blocks loop i in a task until the returned release is called (the
// test's cleanup calls it too, so the server can shut down); it returns
// once the loop is inside the task.
func wedge(t *testing.T, s *Server, i int) (release func()) {
	t.Helper()
	entered, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	s.loops[i].Post(func() {
		close(entered)
		<-unblock
	})
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatalf("loop %d never ran the wedging task", i)
	}
	return release
}

func heartbeat(s *Server, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return s.Heartbeat(ctx)
}

func TestHeartbeatNamesTheLoopThatDoesNotTurn(t *testing.T) {
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, ""), 0)
	if err := heartbeat(l.server, 20*time.Second); err != nil {
		t.Fatalf("idle loops: %v", err)
	}
	release := wedge(t, l.server, 1)
	// Loop 0 turns within the short wait once the machine lets it; loop 1
	// never does while wedged.
	var err error
	testnet.Eventually(t, "a heartbeat naming loop 1 alone", func() bool {
		err = heartbeat(l.server, 100*time.Millisecond)
		return err != nil && strings.Contains(err.Error(), "event loop 1 did not turn")
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: want it to wrap the deadline", err)
	}
	release()
	if err := heartbeat(l.server, 20*time.Second); err != nil {
		t.Fatalf("after the release: %v", err)
	}
}

func TestLoopListNamesEveryLoop(t *testing.T) {
	for ids, want := range map[string]string{
		"3":     "event loop 3",
		"0,1":   "event loops 0 and 1",
		"1,3,4": "event loops 1, 3 and 4",
	} {
		var list []int
		for _, f := range strings.Split(ids, ",") {
			list = append(list, int(f[0]-'0'))
		}
		if got := loopList(list); got != want {
			t.Errorf("loopList(%v) = %q, want %q", list, got, want)
		}
	}
}

// The systemd watchdog of cmd/l4lb, end to end on real loops: pings go to
// a fake NOTIFY_SOCKET while every loop turns, stop while one is wedged,
// and resume once it is released.
func TestWatchdogPingsStopWhileALoopIsWedged(t *testing.T) {
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, ""), 0)
	systemd := testnet.StartFakeSystemd(t)
	t.Setenv("NOTIFY_SOCKET", systemd.Path)

	var misses atomic.Int64
	alive := func(ctx context.Context) error {
		err := l.server.Heartbeat(ctx)
		if err != nil {
			misses.Add(1)
		}
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sdnotify.RunWatchdog(ctx, 50*time.Millisecond, alive, func(error) {})
	}()
	t.Cleanup(func() { cancel(); <-done }) // before the server shuts down
	isPing := func(n testnet.Notification) bool { return n.Has("WATCHDOG", "1") }

	systemd.WaitFor(t, "a ping while the loops turn", isPing)
	release := wedge(t, l.server, 0)
	// A heartbeat that fails after the wedge began is followed only by
	// heartbeats posted behind the wedge: from then on, no ping. Pings
	// sent before it are already queued on the socket.
	before := misses.Load()
	testnet.Eventually(t, "a missed heartbeat", func() bool { return misses.Load() > before })
	systemd.Pending(t)
	first := misses.Load()
	testnet.Eventually(t, "two more missed heartbeats", func() bool { return misses.Load() >= first+2 })
	for _, n := range systemd.Pending(t) {
		if isPing(n) {
			t.Fatalf("watchdog pinged while loop 0 was wedged")
		}
	}
	release()
	systemd.WaitFor(t, "pings again after the release", isPing)
}
