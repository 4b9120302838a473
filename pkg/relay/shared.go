package relay

import (
	"log/slog"
	"sync/atomic"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/loopguard"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/splice"
)

// Front is one listener as the loops see it: the pool it feeds and its
// counters, shared by every loop.
type Front struct {
	Name string
	// pool is the pool new clients are dialed from; a reload swaps it,
	// while connections keep the pool they were accepted with.
	pool atomic.Pointer[pool.Pool]

	OK, Failed, Rejected atomic.Int64
	// Loops counts clients that were l4lb's own backend connections; they
	// are also in Rejected.
	Loops        atomic.Int64
	AcceptErrors atomic.Int64
	// Closed counts ended clients by how they ended (access.go), refused
	// ones included: once every client has ended, its sum is
	// OK+Failed+Rejected.
	Closed [NumCloseReasons]atomic.Int64

	// OnNoBackend is called for each client refused because no backend
	// could be reached, OnLoop for each connection loop cut, with the
	// client's pool (a route's, on a listener with SNI routes). Both must
	// be cheap (a rate-limited log); nil: nothing.
	OnNoBackend func(pool string)
	OnLoop      func(pool string)
	// OnLocalError is called for each client refused for this host's
	// trouble (out of ports toward a backend, fds, memory); cheap, as the
	// others.
	OnLocalError func(pool string)

	policy  atomic.Pointer[Policy]
	routing atomic.Pointer[Routing] // nil: no SNI routes (inspect.go)
	// noAccessLog: the listener keeps out of the access log (its
	// access_log = false; access.go). Shared with the Front of the
	// listener a reload moved (FollowAccessLog); NewFront makes it.
	noAccessLog *atomic.Bool
	// HandedOut counts connections this process passed to the next in a
	// binary upgrade (relays and queued clients), HandedIn the ones it
	// took from the previous process; neither is a client's result.
	HandedOut, HandedIn atomic.Int64
	// Queued counts clients that waited for a backend slot (queue_timeout),
	// by how the wait ended: served (a slot came free), timeout, left
	// (the client went away).
	Queued [numQueueResults]atomic.Int64
	// RecoveryWaits counts waits of clients of an all-down pool for a
	// backend to come back (recovery.go), by how they ended: served (a
	// backend came back), timeout (the connect budget ran out), left.
	RecoveryWaits [numQueueResults]atomic.Int64
}

// NewFront returns the listener name feeding pool p.
func NewFront(name string, p *pool.Pool) *Front {
	f := &Front{Name: name, noAccessLog: new(atomic.Bool)}
	f.pool.Store(p)
	return f
}

// Pool is the pool new clients of the listener are dialed from.
func (f *Front) Pool() *pool.Pool { return f.pool.Load() }

// SetPool makes new clients use p (a reload); open connections keep theirs.
func (f *Front) SetPool(p *pool.Pool) { f.pool.Store(p) }

// SetAccessLog sets whether the listener's clients write access lines
// (its access_log key; on when never set). A reload may flip it: the
// records of connections open then follow it too (accesslog.Sink.For).
func (f *Front) SetAccessLog(on bool) { f.noAccessLog.Store(!on) }

// FollowAccessLog makes prev's connections follow f's access_log from now
// on, through this reload and every later one: f is the listener a
// reload moved to another address under prev's name. Before f serves.
func (f *Front) FollowAccessLog(prev *Front) {
	on := !f.noAccessLog.Load()
	f.noAccessLog = prev.noAccessLog
	f.SetAccessLog(on)
}

// Shared is the state every loop's relay of one server shares.
type Shared struct {
	// cap is the cap on client connections and what counts against it
	// beside Active, as one value (Cap, SetCap).
	cap atomic.Pointer[Cap]
	// Active counts client connections from accept to close.
	Active atomic.Int64
	// OnCap is called for each client refused at the cap (cheap).
	OnCap func()
	Log   *slog.Logger
	Pipes *splice.PipePool
	// Bytes delivered by splice and by copy, flushed once per wake-up.
	Spliced, Copied atomic.Int64

	// access is where the access log's records go (the UDP sessions of
	// the same loops share it: AccessSink); its queue nil: off.
	access accesslog.Sink

	// Guard recognises l4lb's own dials arriving at its listeners (loop
	// detection), shared with the server's UDP sessions.
	Guard *loopguard.Guard
}

// Cap is what a new client is admitted against: it is while
// Active+Elsewhere is below Max.
type Cap struct {
	// Max caps client connections open at once across all loops; past
	// it a new client is accepted and closed at once. A reload may change
	// it.
	Max int64
	// Elsewhere counts the client connections an upgrade's old process
	// still holds, as it last reported them (pkg/handoff), when the cap
	// is set in the file (pkg/server's oldprocess.go says which count),
	// so the cap holds for the service while two processes serve.
	// Connections handed over leave it as they join Active. Whether it
	// counts them changes with Max when a reload sets or clears
	// max_connections, so the two are stored as one: a loop never admits
	// against a new Max with the old count, or the other way round.
	Elsewhere int64
}

// Cap is the cap new clients are admitted against now.
func (s *Shared) Cap() Cap { return *s.cap.Load() }

// SetCap makes c the cap new clients are admitted against.
func (s *Shared) SetCap(c Cap) { s.cap.Store(&c) }

// NewShared returns the shared state of a server.
func NewShared(max int64, pipes *splice.PipePool, log *slog.Logger) *Shared {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Shared{Pipes: pipes, Log: log, Guard: loopguard.New()}
	s.SetCap(Cap{Max: max})
	return s
}

// SetPolicy makes p the listener's policy for clients accepted from now.
func (f *Front) SetPolicy(p *Policy) { f.policy.Store(p) }

// Policy is the listener's policy now; nil: none.
func (f *Front) Policy() *Policy { return f.policy.Load() }
