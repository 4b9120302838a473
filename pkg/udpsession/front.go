package udpsession

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/ipset"
	"github.com/l4lb/l4lb/pkg/pool"
)

// Front is one UDP listener as the loops see it: its settings, the pool
// it feeds and its counters, shared by every loop.
type Front struct {
	Name string
	// settings are swapped whole by a reload; a session keeps the pool it
	// was opened with.
	settings atomic.Pointer[Settings]

	// Sessions counts the sessions open now.
	Sessions atomic.Int64
	// Parked counts backend sockets parked for reuse (see park.go).
	Parked atomic.Int64
	// Bursts counts client bursts that went to a backend as one UDP GSO
	// send (see gso.go).
	Bursts atomic.Int64
	// sockets counts the backend sockets held, sessions' and parked: the
	// file descriptors max_sessions bounds.
	sockets atomic.Int64
	// socks are the listener's sockets, one per loop (Publish), so a loop
	// at the cap can ask the others for room; added collects them as the
	// loops register them.
	socks  atomic.Pointer[[]*udpSock]
	sockMu sync.Mutex
	added  []*udpSock
	// Started counts sessions begun; Ended counts ended ones by reason.
	Started atomic.Int64
	Ended   [NumSessionEnds]atomic.Int64
	// HandedOut counts sessions this process passed to the next in a
	// binary upgrade, HandedIn the ones it took from the previous one
	// (handover.go): Sessions = Started + HandedIn - Ended - HandedOut.
	HandedOut, HandedIn atomic.Int64
	// Unanswered counts sessions whose first datagram had no reply within
	// the pool's reply_timeout (breaker evidence only with count_no_reply).
	Unanswered atomic.Int64
	// Drops counts datagrams dropped, by reason.
	Drops [NumDropReasons]atomic.Int64
	// Datagrams and bytes relayed, by direction (client to backend, backend
	// to client).
	DatagramsToBackend, DatagramsToClient atomic.Int64
	BytesToBackend, BytesToClient         atomic.Int64

	// OnNoBackend is called for each datagram dropped because no backend
	// could take it; it must be cheap (a rate-limited log). nil: nothing.
	OnNoBackend func()
}

// Settings are a UDP listener's pool and session keys.
type Settings struct {
	Pool *pool.Pool
	// SessionTimeout ends a session idle this long (no datagram either way).
	SessionTimeout time.Duration
	// MaxSessions caps the listener's sessions over all loops; at the cap a
	// new client evicts its loop's longest-idle session.
	MaxSessions int64
	// Responses > 0 ends a session after that many backend datagrams.
	Responses int
	// Requests > 0 retires a session after that many client datagrams: the
	// next datagram of that client starts a new session (re-picked), while
	// the retired one still relays replies until it ends.
	Requests int
	// ReuseSockets parks the backend socket of a session that ended
	// cleanly for the next session to that backend (park.go).
	ReuseSockets bool
	// Allow (when not empty) and Deny decide which clients may open a
	// session; deny wins.
	Allow, Deny ipset.Set
	// NoAccessLog keeps the listener's sessions out of the access log
	// (access_log = false): no interim and no close lines. Read as each
	// record would be written, so a reload that sets it silences the
	// sessions open then too.
	NoAccessLog bool
}

// NewFront returns the UDP listener name with settings s.
func NewFront(name string, s Settings) *Front {
	f := &Front{Name: name}
	f.Set(s)
	return f
}

// Settings are the listener's current settings (read them once per use).
func (f *Front) Settings() *Settings { return f.settings.Load() }

// Set replaces the settings (a reload): new sessions use the new pool;
// limits apply from the next datagram.
func (f *Front) Set(s Settings) {
	old := f.settings.Swap(&s)
	if old == nil || s.SessionTimeout >= old.SessionTimeout {
		return
	}
	// The expiry timers are armed for the longer timeout: each loop
	// sweeps now and re-arms for the new one.
	if socks := f.socks.Load(); socks != nil {
		for _, u := range *socks {
			u.l.r.Post(func() {
				if !u.closed {
					u.l.r.Arm(&u.expiry, u.l.r.Now())
				}
			})
		}
	}
}

// SessionEnd is why a UDP session ended.
type SessionEnd uint8

const (
	// EndTimeout: idle for session_timeout.
	EndTimeout SessionEnd = iota
	// EndResponses: the backend sent the listener's `responses` datagrams.
	EndResponses
	// EndEvicted: the longest-idle session, evicted at max_sessions.
	EndEvicted
	// EndRefused: the backend refused (ICMP port unreachable) and no other
	// candidate was left for the session's first datagram.
	EndRefused
	// EndMoved: the backend became unusable (health down, breaker open,
	// disabled) or its drain reached its deadline; the client's next
	// datagram is re-picked.
	EndMoved
	// EndError: the backend socket failed otherwise (host unreachable...).
	EndError
	// EndShutdown: l4lb stopped or the listener was closed.
	EndShutdown
	// NumSessionEnds is the number of SessionEnd values.
	NumSessionEnds
)

var sessionEndNames = [NumSessionEnds]string{"timeout", "responses", "evicted", "refused", "moved", "error", "shutdown"}

// String is the metric label value.
func (e SessionEnd) String() string { return sessionEndNames[e] }

// DropReason is why a datagram was dropped.
type DropReason uint8

const (
	// DropNoBackend: no backend was usable, or every candidate failed.
	DropNoBackend DropReason = iota
	// DropSessionCap: max_sessions reached and this loop had no session to
	// evict.
	DropSessionCap
	// DropLocal: local trouble opening the backend socket (out of fds,
	// ports or memory).
	DropLocal
	// DropBackendSend: the send to the backend failed (its socket buffer
	// full, or an error), or a path MTU report (ICMP) says it was too big
	// on the way; UDP gives no retransmission, so it is gone.
	DropBackendSend
	// DropClientSend: the reply could not be sent to the client.
	DropClientSend
	// DropRefused: the backend refused the datagram (ICMP) and it was not
	// sent elsewhere: the refusal came once the dial was over (after the
	// session's first reply or its reply_timeout), or the datagram was past what a dialing session keeps for the next
	// candidate (keepDatagrams, keepBytes), or no candidate was left.
	DropRefused
	// DropLoop: the datagram came from one of this l4lb's own sessions: a
	// backend of the pool leads back to the listener.
	DropLoop
	// DropDenied: the client's address is in the listener's deny list, or
	// not in its allow list; no session is opened.
	DropDenied
	// DropExcessReply: a backend datagram past the listener's `responses`
	// for its session (read together with the last one owed): not relayed.
	DropExcessReply
	// DropSocketBuffer: the kernel dropped the datagram before the loop
	// could read it, its socket's receive buffer full (a listener socket's:
	// see receive_buffer; or a session's, a backend sending faster than its
	// loop reads). Counted from each socket's own count (SO_RXQ_OVFL,
	// overflow.go) as the datagrams after the drops arrive.
	DropSocketBuffer
	// NumDropReasons is the number of DropReason values.
	NumDropReasons
)

var dropReasonNames = [NumDropReasons]string{"no_backend", "session_cap", "local_error", "backend_send", "client_send", "refused", "loop", "denied", "excess_reply", "socket_buffer"}

// String is the metric label value.
func (r DropReason) String() string { return dropReasonNames[r] }
