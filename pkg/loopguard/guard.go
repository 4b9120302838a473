// Package loopguard recognises l4lb talking to itself: a backend that is
// one of its own listeners (through an address no check could know, such
// as an interface address added later) would otherwise make one client
// open connections, or one datagram open sessions, in a loop until the
// cap. The TCP relay and UDP sessions share one Guard per server.
//
// Both ends of every backend connection (or session socket) dialed to a
// local address on a port l4lb listens on are recorded while it exists;
// a client arriving from one of them is cut. The key is the whole
// connection, not its source alone: Linux reuses an ephemeral port for
// connections to different destinations, so a local client may share its
// source address with one of l4lb's dials. A loop through NAT (the backend
// address rewritten to a listener's) does not match and is not caught.
//
// The hot path pays nothing while no such dial exists (Active is one
// atomic load), and nothing at all for backends elsewhere (MayLoop).
package loopguard

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Conn is one connection (or connected UDP socket) as seen from its
// dialing side.
type Conn struct {
	Local, Remote netip.AddrPort
}

// Guard is the record of one server's own dials. Safe from any goroutine.
type Guard struct {
	// IsLocal reports whether an address belongs to this host; only
	// connections between local addresses can loop. nil: loopback only.
	// Set before the loops start.
	IsLocal func(netip.Addr) bool

	// listenPorts are the ports l4lb listens on: only a dial to a local
	// address on one of them can loop back into l4lb. Copied on write: a
	// reload adds ports while loops read.
	listenPorts atomic.Pointer[map[uint16]bool]
	portsMu     sync.Mutex

	n      atomic.Int64 // recorded dials: 0 lets accept skip the check
	shards [16]shard
}

type shard struct {
	mu    sync.Mutex
	conns map[Conn]struct{}
}

// New returns an empty guard.
func New() *Guard {
	g := &Guard{}
	for i := range g.shards {
		g.shards[i].conns = make(map[Conn]struct{})
	}
	return g
}

// ListenOn records that l4lb listens on port; call it for every listener
// before its sockets serve.
func (g *Guard) ListenOn(port uint16) {
	g.portsMu.Lock()
	defer g.portsMu.Unlock()
	old := g.listenPorts.Load()
	if old != nil && (*old)[port] {
		return
	}
	m := map[uint16]bool{port: true}
	if old != nil {
		for p := range *old {
			m[p] = true
		}
	}
	g.listenPorts.Store(&m)
}

// MayLoop reports whether a dial to ap could reach one of l4lb's own
// listeners: a local address on a listening port. Only such dials are
// recorded, so a data path whose backends are elsewhere (or on other
// ports) pays nothing for loop detection.
func (g *Guard) MayLoop(ap netip.AddrPort) bool {
	ports := g.listenPorts.Load()
	return ports != nil && (*ports)[ap.Port()] && g.Local(ap.Addr())
}

// Local reports whether a belongs to this host.
func (g *Guard) Local(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	return g.IsLocal != nil && g.IsLocal(a)
}

// Active reports whether any dial is recorded: while none is, no client
// needs looking up.
func (g *Guard) Active() bool { return g.n.Load() > 0 }

func (g *Guard) shard(k Conn) *shard {
	ip := k.Local.Addr().As16()
	h := xxhash.Sum64(ip[:]) ^ uint64(k.Local.Port())<<16 ^ uint64(k.Remote.Port())
	return &g.shards[h%uint64(len(g.shards))]
}

// Add records one of l4lb's own dials.
func (g *Guard) Add(k Conn) {
	s := g.shard(k)
	s.mu.Lock()
	s.conns[k] = struct{}{}
	s.mu.Unlock()
	g.n.Add(1)
}

// Remove forgets a dial Add recorded.
func (g *Guard) Remove(k Conn) {
	s := g.shard(k)
	s.mu.Lock()
	delete(s.conns, k)
	s.mu.Unlock()
	g.n.Add(-1)
}

// Has reports whether k is one of l4lb's own dials, seen from the other
// end: a client whose (address, listener address) is a dial's (local,
// remote).
func (g *Guard) Has(k Conn) bool {
	if g.n.Load() == 0 {
		return false
	}
	s := g.shard(k)
	s.mu.Lock()
	_, ok := s.conns[k]
	s.mu.Unlock()
	return ok
}
