package server

import (
	"log/slog"
	"runtime"
)

// startProcs is GOMAXPROCS as the process started: the CPUs it may use,
// which the runtime reads from its CPU affinity and a container's CPU
// limit (runtime.NumCPU sees only the affinity, so in a container limited
// to 2 CPUs of a 64-CPU host it says 64). Read once: ReserveProcs raises
// GOMAXPROCS later.
var startProcs = runtime.GOMAXPROCS(0)

// DefaultEventLoops is event_loops = 0: one loop per CPU the process may
// use.
func DefaultEventLoops() int { return startProcs }

// ReserveProcs makes GOMAXPROCS at least loops+1: a busy event loop keeps
// a P while it waits for events (pkg/reactor/holdp.go), and the health
// checks, breakers and admin API need one more to run beside the loops.
// The loops hold Ps only while busy, so an idle process costs nothing
// more; a larger GOMAXPROCS is kept as it is.
func ReserveProcs(loops int, log *slog.Logger) {
	have := runtime.GOMAXPROCS(0)
	if have >= loops+1 {
		return
	}
	runtime.GOMAXPROCS(loops + 1)
	log.Info("GOMAXPROCS raised so every event loop can keep a P and one is left for the rest",
		"from", have, "to", loops+1, "event_loops", loops)
}
