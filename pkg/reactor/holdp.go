package reactor

import (
	"runtime"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname goyield
)

// A busy loop waits for events with a raw epoll_wait that keeps its P
// (the runtime's right to run Go code) instead of one that goes through
// the runtime's syscall bookkeeping. Measured on the bench's conn
// scenario, that bookkeeping was most of what a loop spent beside the
// kernel: every wake-up from a blocking wait went through exitsyscall,
// which woke sysmon and contended on the scheduler lock, and sysmon, seeing
// a P in a syscall on every tick, retook it and so never slowed down from
// its 20 µs tick.
//
// Holding a P is safe for the rest of the process only while another P is
// left for every other goroutine (health checks, admin, breakers): a loop
// holds one only with a token, and there are GOMAXPROCS-1 tokens in all.
// A loop that has seen no event for holdIdle gives its token back and
// waits the runtime's way until its next event, so an idle process still
// lets its Ps sleep.
//
// The garbage collector still stops a holding loop at once: its stop and
// its stack scans signal the thread (SIGURG), which ends the raw wait with
// EINTR, and poller.wait then yields (goyield: the call's stack check
// takes a pending stop, and the scheduler it enters takes a world stop).
// Where those signals are turned off (GODEBUG=asyncpreemptoff=1), a stop
// waits for the raw wait to end, up to holdIdle for each of a
// collection's few stops.

// holdIdle is how long a loop keeps its P with no event: past it, the
// loop stops holding. Raw waits are interrupted by the runtime (sysmon's
// 10 ms time slices, each garbage collection's stops); poller.wait keeps
// both this limit and the caller's timeout as times across them.
const holdIdle = 5 * time.Millisecond

// holders counts the loops holding a P now.
var holders atomic.Int32

// acquireHold takes a token when one is left.
func acquireHold() bool {
	limit := int32(runtime.GOMAXPROCS(0) - 1)
	for {
		n := holders.Load()
		if n >= limit {
			return false
		}
		if holders.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func releaseHold() { holders.Add(-1) }

// overHeld reports whether more loops hold a P than tokens exist now:
// GOMAXPROCS went down since they took theirs (the runtime follows a
// container's CPU limit unless GOMAXPROCS was set). A holding loop checks
// each time it yields to the runtime (every yieldEvery while busy, and
// after an interrupted wait) and every overHeldEvery waits (the check
// takes the scheduler's lock), so a busy one lets go within a few
// milliseconds and an idle one within holdIdle.
func overHeld() bool { return int(holders.Load()) > runtime.GOMAXPROCS(0)-1 }

const overHeldEvery = 256

// A holding loop's goroutine runs on its P for as long as the loop stays
// busy, and the runtime's monitor (sysmon) preempts a goroutine that has
// run 10 ms without passing through the scheduler: it signals the thread,
// and the preempted goroutine goes to the global run queue, which wakes a
// thread for the idle P beside the loops; that thread spins, often takes
// the loop over, and the first one sleeps. In the sni bench (one client,
// ~800 connections a second) that chain, a hundred times a second, was
// the largest part of what a loop spent beside its own work. A holding
// loop therefore passes through the scheduler itself every yieldEvery,
// well inside the slice, the cheap way: runtime.goyield queues it on its
// own P without waking any thread, so the same thread takes it back at
// once (after any goroutine queued there), and the new slice restarts the
// monitor's count.
const yieldEvery = int64(4 * time.Millisecond)

// yieldIfDue passes a holding loop through the scheduler when yieldEvery
// has gone by on its clock since it last did (l.now: this turn's
// reading, no clock read of its own), and gives its P token back if
// GOMAXPROCS went down meanwhile. That check is needed here: these yields
// keep sysmon from ever interrupting a busy loop's raw wait, and the
// EINTR it caused was how a busy loop used to learn of a lower
// GOMAXPROCS (a world stop that finds the loop running Go code, not
// waiting, interrupts no wait). It reports whether it yielded.
func (l *Loop) yieldIfDue() (yielded bool) {
	if !l.poll.holding || l.now-l.yieldedAt < yieldEvery {
		return false
	}
	yield()
	l.yieldedAt = l.now
	if overHeld() {
		l.poll.release() // the next wait is the runtime's
	}
	return true
}

// yield is goyield; tests count the calls.
var yield = goyield

// goyield is runtime.goyield: Gosched onto the current P's local run queue
// and without waking an idle P. The runtime keeps it for packages that
// link to it (go.dev/issue/67401), gVisor's netstack among them.
//
//go:linkname goyield runtime.goyield
func goyield()
