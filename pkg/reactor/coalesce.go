package reactor

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/rawsys"
)

// Wake-up coalescing ([global] wake_coalesce). A loop that runs out of
// events sleeps in epoll_wait, and the next packet for it wakes it: on
// the core that sent the packet, that wake-up costs an inter-processor
// interrupt, which in a VM is an exit to the hypervisor. With many busy
// connections those wake-ups come back to back, one per event. A loop
// that has just handled data on several connections at once instead
// sleeps on a timer for the coalescing window and then takes whatever
// arrived meanwhile in one wake-up, as a NIC's interrupt moderation
// does: the senders wake no one, and the work is done in bigger batches.
//
// Only a turn of events on two or more sockets, all of them data on
// relaying connections or UDP traffic, arms the window: a sign of several
// flows at once, or of one stream both reading and writing in bulk. A
// lone connection's ping-pong brings one event per turn, so its requests
// are never delayed; a turn that accepted, finished a dial or saw a
// hang-up does not arm it either: on the bench's connection churn a
// window cost about 3 µs of CPU per connection for no gain. A window that
// brings nothing ends coalescing until the next qualifying turn; a window
// never runs past the loop's next timer.
//
// Measured on the bench's redis scenario (redis-benchmark -c 50 through
// one loop, 2-vCPU VM): 75.6k GET/s without, 82.9k with a 20 µs window,
// for 8.7 instead of 8.05 µs of the proxy's CPU per request (HAProxy:
// 82k at 10.1 µs). The kernel adds the thread's timer slack (50 µs for
// an ordinary thread) to the sleep, which the measurement includes; a
// precise 50 µs sleep did no better.

// gather is a coalesced wait: it takes the events already there, else
// sleeps out the window (never past deadline, the next timer, when set)
// and takes the events that arrived meanwhile. It returns how many it
// found, 0 when the window brought none (or the poll failed: the caller's
// blocking wait reports that).
func (p *poller) gather(now, deadline time.Time) int {
	if n, err := rawsys.EpollWait(p.epfd, p.events, 0); err == nil && n > 0 {
		return n
	}
	end := now.Add(p.coalesce)
	if !deadline.IsZero() && deadline.Before(end) {
		end = deadline
	}
	if now.Before(end) {
		p.gathers++
	}
	// The window is kept as a time, as poller.wait keeps its limits: the
	// runtime interrupts raw sleeps (sysmon's 10 ms time slices, each
	// garbage collection's stops), and each interruption is let through.
	for d := end.Sub(now); d > 0; d = time.Until(end) {
		if rawsys.Nanosleep(d) != unix.EINTR {
			break
		}
		runtime.Gosched()
	}
	n, err := rawsys.EpollWait(p.epfd, p.events, 0)
	if err != nil {
		return 0
	}
	return n
}
