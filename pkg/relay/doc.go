// Package loop is l4lb's data path: one event loop per CPU, each a
// goroutine that waits in epoll_wait, keeping its thread and P while busy
// (holdp.go), and owns everything of the connections it holds, with no
// goroutine per connection.
//
// A loop owns one SO_REUSEPORT listening socket per TCP listener (the
// kernel spreads new connections over the loops), accepts until EAGAIN,
// dials backends with non-blocking connects (the breaker's generation
// captured before connect(2), retries to the next candidate inside the
// loop, all within the pool's connect budget), and relays bytes with the
// per-direction mechanics of pkg/splice: small reads copied through the
// loop's buffer, streams spliced through pipes held only while data is in
// flight. Every fd is registered once, edge-triggered, for reading and
// writing; the loop remembers readiness itself, so a connection costs two
// epoll_ctl calls in its life and none per state change.
//
// Timers (connect timeouts, idle timeouts, the count_early_reset window)
// live in one heap per loop whose head sets epoll_wait's timeout: no timer
// object per read and none per connection beyond a heap slot. Idle
// timeouts are not re-armed on traffic; a firing timer re-arms itself for
// whatever is left since the last activity.
//
// Fairness: a connection moves at most a budget of bytes per wake-up; one
// with more to move goes on the loop's ready list and continues after the
// other events, so one bulk transfer cannot starve thousands of small
// connections on the same loop.
//
// Pick, pool, breaker and health are called synchronously from the loop
// (they are lock-free on the hot path). Other goroutines talk to a loop
// only through its task queue and eventfd (shutdown, cutting connections).
package relay
