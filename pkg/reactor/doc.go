// Package reactor is l4lb's event loop: one per CPU, each a goroutine
// that waits in epoll_wait, keeping its thread and P while busy
// (holdp.go), and runs what is registered on it with no goroutine per
// connection. It knows nothing of TCP, UDP, pools or backends: the TCP
// relay (pkg/relay) and UDP sessions (pkg/udpsession) are its Parts, and
// their sockets its Owners.
//
// Every fd is registered once, edge-triggered (SocketEvents: reading,
// writing, hang-ups and urgent data; ReadSocketEvents: the same but
// writing, asked for with WatchWrites only once a write found the socket
// full; DatagramEvents: reading), but for a listening socket,
// level-triggered (ListenEvents), in a slot with a sequence number, so an
// event still queued for a closed fd never reaches the next owner of that
// number. The owner remembers readiness itself, so a connection costs two
// epoll_ctl calls in its life (three if its client ever fills) and none
// per state change. Each event reaches its owner with one interface call
// (Owner.Event); an owner with work left past its budget asks to go on
// after the turn's other events (MarkReady), which keeps one bulk
// transfer from starving thousands of small connections.
//
// Timers (connect and idle timeouts, retries, session expiry) live in one
// heap per loop whose head sets epoll_wait's timeout: a Timer is embedded
// in what it times, so arming one allocates nothing. Time is the loop's
// clock (a clock.Clock, real unless a test injects one) in nanoseconds
// since the loop was made, read once per wake-up (Now) or fresh (Clock).
//
// After each turn the loop calls its Parts' AfterTurn (flushing reply
// batches and counters) and, when it stops, their Close. A loop that
// handled data on several sockets in one turn may sleep a short window
// before its next wait (coalesce.go); a busy one may spin (busy_poll).
// How it spends its time is published for metrics (stats.go).
//
// Other goroutines reach a loop only through its task queue and eventfd
// (Post, Do); everything else is the loop's own, on its goroutine,
// without locks.
package reactor
