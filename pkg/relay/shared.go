package loop

import (
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

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
	// could be reached, OnLoop for each connection loop cut. Both must be
	// cheap (a rate-limited log); nil: nothing.
	OnNoBackend func()
	OnLoop      func()
	// OnLocalError is called for each client refused for this host's
	// trouble (out of ports toward a backend, fds, memory); cheap, as the
	// others.
	OnLocalError func()

	policy atomic.Pointer[Policy]
	// Queued counts clients that waited for a backend slot (queue_timeout),
	// by how the wait ended: served (a slot came free), timeout, left
	// (the client went away).
	Queued [numQueueResults]atomic.Int64
}

// NewFront returns the listener name feeding pool p.
func NewFront(name string, p *pool.Pool) *Front {
	f := &Front{Name: name}
	f.pool.Store(p)
	return f
}

// Pool is the pool new clients of the listener are dialed from.
func (f *Front) Pool() *pool.Pool { return f.pool.Load() }

// SetPool makes new clients use p (a reload); open connections keep theirs.
func (f *Front) SetPool(p *pool.Pool) { f.pool.Store(p) }

// Shared is the state every loop of one server shares.
type Shared struct {
	// Max caps client connections open at once across all loops; past
	// it a new client is accepted and closed at once. A reload may change
	// it.
	Max atomic.Int64
	// Active counts client connections from accept to close.
	Active atomic.Int64
	// OnCap is called for each client refused at the cap (cheap).
	OnCap func()
	// IsLocal reports whether an address belongs to this host; only
	// connections between local addresses are checked for loops. nil:
	// loopback only.
	IsLocal func(netip.Addr) bool
	Log     *slog.Logger
	Pipes   *splice.PipePool
	// BusyPoll is how long a busy loop polls for events before it sleeps
	// (poller.wait); WakeCoalesce how long a loop that relayed data on
	// several connections sleeps on a timer instead (coalesce.go). Both
	// are set before the loops are made.
	BusyPoll, WakeCoalesce time.Duration

	// Bytes delivered by splice and by copy, flushed once per wake-up.
	Spliced, Copied atomic.Int64

	// access is where ended clients' records go; nil: access log off.
	access atomic.Pointer[AccessQueue]

	// listenPorts are the ports l4lb listens on: only a dial to a local
	// address on one of them can loop back into l4lb. Copied on write: a
	// reload adds ports while loops read.
	listenPorts atomic.Pointer[map[uint16]bool]
	portsMu     sync.Mutex
	own         ownDials
}

// ListenOn tells the loops that l4lb listens on port; call it for every
// listener before the loops start.
func (s *Shared) ListenOn(port uint16) {
	s.portsMu.Lock()
	defer s.portsMu.Unlock()
	old := s.listenPorts.Load()
	if old != nil && (*old)[port] {
		return
	}
	m := map[uint16]bool{port: true}
	if old != nil {
		for p := range *old {
			m[p] = true
		}
	}
	s.listenPorts.Store(&m)
}

// mayLoop reports whether a dial to ap could reach one of l4lb's own
// listeners: a local address on a listening port. Only such dials are
// recorded, so a data path whose backends are elsewhere (or on other
// ports) pays nothing for loop detection.
func (s *Shared) mayLoop(ap netip.AddrPort) bool {
	ports := s.listenPorts.Load()
	return ports != nil && (*ports)[ap.Port()] && s.isLocal(ap.Addr())
}

// NewShared returns the shared state of a server.
func NewShared(max int64, pipes *splice.PipePool, log *slog.Logger) *Shared {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Shared{Pipes: pipes, Log: log}
	s.Max.Store(max)
	s.own.init()
	return s
}

func (s *Shared) isLocal(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	return s.IsLocal != nil && s.IsLocal(a)
}

// ownDials remembers both ends of every backend connection a loop made to
// a local address, so that a client arriving on one of them is recognised
// as l4lb talking to itself: a backend that is one of its own listeners
// (through an address check could not know, such as an interface address
// added later) would otherwise make one client open connections in a loop
// until the cap.
//
// The key is the whole connection, not its source alone: Linux reuses an
// ephemeral port for connections to different destinations, so a local
// client may share its source address with one of l4lb's dials. A loop
// through NAT (the backend address rewritten to a listener's) does not
// match and is not caught here.
type ownDials struct {
	n      atomic.Int64 // recorded dials: 0 lets accept skip the check
	shards [16]ownDialShard
}

// conn4 is one TCP connection as seen from its dialing side.
type conn4 struct {
	local, remote netip.AddrPort
}

type ownDialShard struct {
	mu    sync.Mutex
	conns map[conn4]struct{}
}

func (o *ownDials) init() {
	for i := range o.shards {
		o.shards[i].conns = make(map[conn4]struct{})
	}
}

func (o *ownDials) shard(k conn4) *ownDialShard {
	ip := k.local.Addr().As16()
	h := xxhash.Sum64(ip[:]) ^ uint64(k.local.Port())<<16 ^ uint64(k.remote.Port())
	return &o.shards[h%uint64(len(o.shards))]
}

func (o *ownDials) add(k conn4) {
	s := o.shard(k)
	s.mu.Lock()
	s.conns[k] = struct{}{}
	s.mu.Unlock()
	o.n.Add(1)
}

func (o *ownDials) remove(k conn4) {
	s := o.shard(k)
	s.mu.Lock()
	delete(s.conns, k)
	s.mu.Unlock()
	o.n.Add(-1)
}

func (o *ownDials) has(k conn4) bool {
	if o.n.Load() == 0 {
		return false
	}
	s := o.shard(k)
	s.mu.Lock()
	_, ok := s.conns[k]
	s.mu.Unlock()
	return ok
}
