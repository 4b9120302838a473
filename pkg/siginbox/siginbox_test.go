package siginbox

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// inboxAfter sends sent into a fresh inbox (an unbuffered send returns
// only once the inbox took it), then a SIGUSR1 as a marker, which queues
// last, and returns what the inbox hands out before the marker.
func inboxAfter(t *testing.T, sent ...os.Signal) []os.Signal {
	t.Helper()
	in := make(chan os.Signal)
	done := make(chan struct{})
	defer close(done)
	out := signalInbox(in, done)
	for _, s := range append(sent, syscall.SIGUSR1) {
		in <- s
	}
	var got []os.Signal
	for {
		select {
		case s := <-out:
			if s == syscall.SIGUSR1 {
				return got
			}
			got = append(got, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("the inbox handed out %v and then nothing", got)
		}
	}
}

func TestSignalInboxKeepsStopBehindManyReloads(t *testing.T) {
	var sent []os.Signal
	for range 20 {
		sent = append(sent, syscall.SIGHUP)
	}
	sent = append(sent, syscall.SIGUSR2, syscall.SIGUSR2, syscall.SIGTERM)
	got := inboxAfter(t, sent...)
	want := []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR2}
	if !slices.Equal(got, want) {
		t.Fatalf("inbox handed out %v, want %v: the stop first, one reload, one upgrade", got, want)
	}
}

func TestSignalInboxKeepsTwoStopsInOrder(t *testing.T) {
	got := inboxAfter(t, syscall.SIGHUP, syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGTERM, syscall.SIGINT)
	want := []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
	if !slices.Equal(got, want) {
		t.Fatalf("inbox handed out %v, want %v: two stops (drain, then cut) in arrival order, then one reload", got, want)
	}
}

func TestSignalInboxReloadAfterTakenReloadIsKept(t *testing.T) {
	in := make(chan os.Signal)
	done := make(chan struct{})
	defer close(done)
	out := signalInbox(in, done)
	in <- syscall.SIGHUP
	if s := <-out; s != syscall.SIGHUP {
		t.Fatalf("got %v, want SIGHUP", s)
	}
	// A SIGHUP during the reload the first one started: the file may
	// have changed again, so it must reload once more.
	in <- syscall.SIGHUP
	select {
	case s := <-out:
		if s != syscall.SIGHUP {
			t.Fatalf("got %v, want SIGHUP", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a SIGHUP that came after the previous one was taken was lost")
	}
}

func TestSignalInboxEndsWhenDone(t *testing.T) {
	before := runtime.NumGoroutine()
	in := make(chan os.Signal)
	done := make(chan struct{})
	signalInbox(in, done)
	in <- syscall.SIGHUP // pending, never read
	close(done)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the inbox: it did not end when done closed", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}

// UntilStop ends its context at the first stop signal, with the cause
// given for it; a reload or an upgrade signal meanwhile is dropped, and
// stop ends the watch without a signal.
func TestUntilStopEndsAtAStopSignal(t *testing.T) {
	sigs := make(chan os.Signal)
	var cause error = errors.New("second signal")
	ctx, stop := UntilStop(context.Background(), sigs, func(s os.Signal) error {
		if s != syscall.SIGINT {
			t.Errorf("cause asked for %v, want SIGINT", s)
		}
		return cause
	})
	sigs <- syscall.SIGHUP
	sigs <- syscall.SIGUSR2
	if ctx.Err() != nil {
		t.Fatal("ended by a reload or an upgrade signal")
	}
	sigs <- syscall.SIGINT
	<-ctx.Done()
	if context.Cause(ctx) != cause {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	stop()

	ctx, stop = UntilStop(context.Background(), sigs, func(os.Signal) error { return cause })
	stop()
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("after stop: cause %v, want canceled", context.Cause(ctx))
	}
	select {
	case sigs <- syscall.SIGTERM:
		t.Fatal("a stopped watch still takes signals")
	case <-time.After(50 * time.Millisecond):
	}
}
