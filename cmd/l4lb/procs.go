package main

import (
	"log/slog"
	"runtime"
)

// reserveProcs makes GOMAXPROCS at least loops+1: a busy event loop keeps
// a P while it waits for events (pkg/reactor/holdp.go), and the health
// checks, breakers and admin API need one more to run beside the loops.
// The loops hold Ps only while busy, so an idle process costs nothing
// more; a larger GOMAXPROCS is kept as it is.
func reserveProcs(loops int, log *slog.Logger) {
	have := runtime.GOMAXPROCS(0)
	if have >= loops+1 {
		return
	}
	runtime.GOMAXPROCS(loops + 1)
	log.Info("GOMAXPROCS raised so every event loop can keep a P and one is left for the rest",
		"from", have, "to", loops+1, "event_loops", loops)
}
