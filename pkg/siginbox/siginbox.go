// Package siginbox delivers a process's control signals without losing
// the ones that matter: every stop signal (SIGTERM, SIGINT) first, in
// order, and one of each other kind waiting (a reload or an upgrade runs
// once for however many came while the process was busy).
package siginbox

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Subscribe delivers sigs through an inbox (signalInbox), so that none
// that matters is lost while the process is busy (starting, reloading,
// upgrading); stop unsubscribes and ends the inbox.
func Subscribe(sigs ...os.Signal) (_ <-chan os.Signal, stop func()) {
	raw := make(chan os.Signal, 16)
	signal.Notify(raw, sigs...)
	done := make(chan struct{})
	out := signalInbox(raw, done)
	return out, func() {
		signal.Stop(raw)
		close(done)
	}
}

// signalInbox reads in at once and hands its signals to the returned
// channel as they are taken. signal.Notify drops a signal its channel has
// no room for, so a plain buffered channel that a long reload or start
// left full would lose whatever came next, a SIGTERM included, and
// systemd would wait out its stop timeout. The inbox keeps every stop
// signal (SIGTERM, SIGINT) and hands them out before anything else; a
// SIGHUP or SIGUSR2 already waiting absorbs another of its kind, since
// one reload reads the newest file and an upgrade runs once. It ends
// when done closes.
func signalInbox(in <-chan os.Signal, done <-chan struct{}) <-chan os.Signal {
	out := make(chan os.Signal)
	go func() {
		var queue []os.Signal
		for {
			var send chan os.Signal
			var next os.Signal
			if len(queue) > 0 {
				send, next = out, queue[0]
			}
			select {
			case s := <-in:
				queue = enqueueSignal(queue, s)
			case send <- next:
				queue = queue[1:]
			case <-done:
				return
			}
		}
	}()
	return out
}

// enqueueSignal adds s to queue: a stop signal after the stops already
// waiting and before everything else, at most two of them (the first
// drains, the second cuts the drain: more say nothing new); a SIGHUP or
// SIGUSR2 at the end, unless one of its kind waits already.
func enqueueSignal(queue []os.Signal, s os.Signal) []os.Signal {
	stops := 0
	for _, q := range queue {
		if isStopSignal(q) {
			stops++
		} else if q == s {
			return queue
		}
	}
	if !isStopSignal(s) {
		return append(queue, s)
	}
	if stops >= 2 {
		return queue
	}
	// Stops lead the queue, so the first non-stop is at index stops.
	queue = append(queue, nil)
	copy(queue[stops+1:], queue[stops:])
	queue[stops] = s
	return queue
}

func isStopSignal(s os.Signal) bool { return s == syscall.SIGTERM || s == syscall.SIGINT }

// UntilStop is parent until a stop signal comes on sigs: then it is
// cancelled, its cause what cause returns for the signal (called at that
// moment). Other signals are taken and dropped. stop ends the watch; call
// it when the context's work is done.
func UntilStop(parent context.Context, sigs <-chan os.Signal, cause func(os.Signal) error) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case s := <-sigs:
				if isStopSignal(s) {
					cancel(cause(s))
					return
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		close(done)
		<-ended
		cancel(nil)
	}
}
