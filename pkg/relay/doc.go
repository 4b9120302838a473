// Package relay is l4lb's TCP relay: on each event loop (pkg/reactor),
// a Loop accepts the clients of its listening sockets, runs the
// listener's policy on them, dials a backend and relays bytes both ways
// until the connection ends, for exactly one reason.
//
// A loop owns one SO_REUSEPORT listening socket per TCP listener (the
// kernel spreads new connections over the loops), level-triggered, and
// accepts a burst of clients per report of it: one, so that a client at a
// time costs one accept4, growing to 64 in a storm (accept.go), dials
// backends with non-blocking connects (the breaker's generation
// captured before connect(2), retries to the next candidate inside the
// loop, all within the pool's connect budget), and relays with the
// per-direction mechanics of pkg/splice: small reads copied through the
// loop's buffer, streams spliced through pipes held only while data is in
// flight. Pick, pool and breaker are called synchronously from the loop
// (they are lock-free on the hot path); other goroutines reach a
// connection only through its loop's task queue (CutAll, CutBackend).
//
// Idle timeouts are not re-armed on traffic: a firing timer re-arms itself
// for whatever is left since the last activity. A connection moves at most
// a budget of bytes per direction per turn, then yields to the loop's
// other work.
//
// Reading order: the files go one way, from the loop to the end of a
// connection, each calling into the ones after it:
//
//	loop.go       the relay of one event loop: its parts and what it is told
//	accept.go     listening sockets: accept, back off, hand over on a drain
//	conn.go       a connection, its two endpoints, its events and timer
//	admit.go      PROXY header in, access control, per-source limits
//	dial.go       candidates, non-blocking connects, retries, the budget
//	connect.go    opening and connecting a backend socket
//	proxyout.go   PROXY header out to the backend
//	queue.go      waiting for a backend slot (queue_timeout)
//	relay.go      moving bytes, fairness, the idle timeout
//	latereset.go  a backend's reset of the client's last bytes
//	close.go      how a connection ends: close and its callers
//	access.go     close reasons, results, the access-log records (close, connect, interim)
//	policy.go     a listener's policy (PolicyFor)
//	shared.go     a listener (Front) and the server's shared state
//	connlist.go   the loop's list of connections
//	handoff.go    listening sockets for a binary upgrade
//
// The dial and the queue call each other (a queued client is dialed when
// a slot frees; a dial that finds every backend full queues), and close
// leaves the queue: those are the references that run back.
package relay
