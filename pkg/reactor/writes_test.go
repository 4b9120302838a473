package reactor

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// chanOwner passes every event it gets to a channel.
type chanOwner chan uint32

func (o chanOwner) Event(ev uint32) { o <- ev }

// A socket registered with ReadSocketEvents reports reading but never
// writing, though its send buffer is empty; WatchWrites then reports the
// writability it has now, with no write needed to raise an edge.
func TestReadSocketEventsThenWatchWrites(t *testing.T) {
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	defer func() { l.Stop(); l.Wait() }()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	o := make(chanOwner, 16)
	var rerr error
	l.Do(func() { rerr = l.Register(fds[0], o, ReadSocketEvents) })
	if rerr != nil {
		t.Fatal(rerr)
	}
	defer func() { l.Do(func() { l.Forget(fds[0]); unix.Close(fds[0]) }) }()

	if _, err := unix.Write(fds[1], []byte("x")); err != nil {
		t.Fatal(err)
	}
	ev := next(t, o)
	if ev&unix.EPOLLIN == 0 || ev&unix.EPOLLOUT != 0 {
		t.Fatalf("first event %#x: want EPOLLIN without EPOLLOUT", ev)
	}

	l.Do(func() { rerr = l.WatchWrites(fds[0]) })
	if rerr != nil {
		t.Fatal(rerr)
	}
	if ev := next(t, o); ev&unix.EPOLLOUT == 0 {
		t.Fatalf("event after WatchWrites %#x: want EPOLLOUT", ev)
	}
}

func next(t *testing.T, o chanOwner) uint32 {
	t.Helper()
	select {
	case ev := <-o:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return 0
	}
}
