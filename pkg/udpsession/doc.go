// Package udpsession is l4lb's UDP relay: on each event loop
// (pkg/reactor), a Loop reads the datagrams of its socket of each UDP
// listener and relays them through sessions, one per client address and
// port, each a socket connected to one backend, in the loop's memory with
// no goroutine and no timer of its own once its backend has answered.
//
// Datagrams move in batches (recvmmsg in, sendmmsg out once per turn), a
// client's burst of equal-sized datagrams goes to its backend as one UDP
// GSO send, and a session's first datagram is the breaker's evidence (a
// "dial": a reply is a success, a refusal a failure and what the client
// sent until then goes to the next candidate). Sessions end idle (session_timeout), after the
// listener's `responses`, evicted at max_sessions, refused, or moved off a
// backend out of rotation; in a binary upgrade they move to the new
// process, backend socket and all. Pick, pool and breaker are called
// synchronously from the loop; other goroutines reach it only through its
// task queue.
//
// Reading order:
//
//	loop.go         the UDP side of one event loop
//	sock.go         a listener socket: reading, bursts, opening sessions, the cap
//	session.go      a session: its dial, sends, replies, refusals, its end
//	park.go         parked backend sockets (reuse_sockets)
//	out.go          the reply batch
//	gso.go          UDP GSO bursts
//	overflow.go     drops the kernel counts (SO_RXQ_OVFL)
//	batch.go        the mmsghdr batches, socket names, control messages
//	front.go        a listener (Front), its settings and counters
//	sessionlist.go  a socket's sessions, longest idle first
//	handover.go     sessions moving to the next process in a binary upgrade
//	access.go       a session's access log records
//
// A session reports back to its socket (counts, drops, the idle order):
// those are the references that run back.
package udpsession
