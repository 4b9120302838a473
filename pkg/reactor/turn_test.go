package reactor

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// funcOwner calls its function for each event.
type funcOwner func(ev uint32)

func (o funcOwner) Event(ev uint32) { o(ev) }

// socketOwner registers o for a socket pair's first end on l and returns
// the other end, to write to.
func socketOwner(t *testing.T, l *Loop, o Owner) (peer int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rerr error
	l.Do(func() { rerr = l.Register(fds[0], o, ReadSocketEvents) })
	if rerr != nil {
		t.Fatal(rerr)
	}
	t.Cleanup(func() {
		if !l.Do(func() { l.Forget(fds[0]); unix.Close(fds[0]) }) {
			unix.Close(fds[0]) // the loop stopped first
		}
		unix.Close(fds[1])
	})
	return fds[1]
}

// A timer an event arms for now (a freed slot retries the queue this
// way) fires in the same turn, before the loop waits again: the turn's
// timers go by a reading taken after its events, however few they were.
func TestTimerArmedForNowFiresInTheSameTurn(t *testing.T) {
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	defer func() { l.Stop(); l.Wait() }()
	var tm Timer
	armed, fired := make(chan uint64, 1), make(chan uint64, 1)
	tm.OnFire(func(int64) { fired <- l.Turn() })
	peer := socketOwner(t, l, funcOwner(func(uint32) {
		l.Arm(&tm, l.Clock())
		armed <- l.Turn()
	}))
	if _, err := unix.Write(peer, []byte("x")); err != nil {
		t.Fatal(err)
	}
	a, f := <-armed, <-fired
	if a != f {
		t.Fatalf("a timer armed for now in turn %d fired in turn %d", a, f)
	}
}

// A turn of one event counts its work as busy: the stretch from the
// wake-up to the next wait that may sleep, read after the event.
func TestOneEventTurnCountsAsBusy(t *testing.T) {
	l, clk, stop := startOnFakeClock(t)
	defer stop()
	done := make(chan struct{}, 1)
	peer := socketOwner(t, l, funcOwner(func(uint32) {
		clk.Advance(10 * time.Millisecond) // the event's work
		done <- struct{}{}
	}))
	start := l.Stats().Busy
	if _, err := unix.Write(peer, []byte("x")); err != nil {
		t.Fatal(err)
	}
	<-done
	if !testnet.WaitUntil(20*time.Second, func() bool { return l.Stats().Busy-start >= 10*time.Millisecond }) {
		t.Fatalf("busy grew by %v over a one-event turn of 10ms", l.Stats().Busy-start)
	}
}
