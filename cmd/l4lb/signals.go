package main

import (
	"os"
	"os/signal"
	"syscall"
)

// handledSignals are the signals l4lb run and demo act on: SIGTERM and
// SIGINT drain and exit, SIGHUP reloads, SIGUSR2 upgrades.
var handledSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR2}

// startSignals receives handledSignals from the first thing l4lb run and
// demo do (subscribeStartSignals, in main.go's run), before the work of
// their start (reading the file, an upgrade's state, the pools, binding),
// so no signal meanwhile takes its default action: an unsubscribed SIGHUP
// ends a Go process, and an unsubscribed SIGUSR2 is dropped.
// serveUntilSignal takes the channel and acts on what came, once serving.
var startSignals <-chan os.Signal

// subscribeStartSignals subscribes startSignals; stop unsubscribes it.
func subscribeStartSignals() (stop func()) {
	sigs, unsubscribe := subscribeSignals()
	startSignals = sigs
	return func() {
		unsubscribe()
		startSignals = nil
	}
}

// subscribeSignals delivers handledSignals through a signalInbox, so that
// none is lost while l4lb is busy (starting, reloading, upgrading); stop
// unsubscribes and ends the inbox.
func subscribeSignals() (<-chan os.Signal, func()) {
	raw := make(chan os.Signal, 16)
	signal.Notify(raw, handledSignals...)
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
