package main

import (
	"os"
	"syscall"

	"github.com/l4lb/l4lb/pkg/siginbox"
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

// subscribeSignals delivers handledSignals without losing a stop signal
// while l4lb is busy (pkg/siginbox); stop unsubscribes.
func subscribeSignals() (<-chan os.Signal, func()) { return siginbox.Subscribe(handledSignals...) }
