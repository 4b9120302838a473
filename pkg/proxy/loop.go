package proxy

import (
	"net/netip"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// ownDials remembers the two ends of every backend connection l4lb has
// open, so that a client arriving on one of them is recognised as l4lb
// talking to itself: a backend that is one of its own listeners (through an
// address check could not know, such as an interface address added later)
// would otherwise make one client open connections in a loop until the
// cap. It ends the loop within a hop or two (a hop whose dial was not yet
// recorded when it was checked passes once; the next one sees it).
//
// The key is the whole connection, not its source alone: Linux reuses an
// ephemeral port for connections to different destinations, so a local
// client may well share its source address with one of l4lb's dials. A
// loop through NAT (the backend address rewritten to a listener's) does
// not match and is not caught here.
type ownDials struct {
	shards [16]ownDialShard
}

// conn4 is one TCP connection as seen from its dialing side.
type conn4 struct {
	local, remote netip.AddrPort
}

type ownDialShard struct {
	mu    sync.Mutex
	addrs map[conn4]struct{}
}

func (o *ownDials) init() {
	for i := range o.shards {
		o.shards[i].addrs = make(map[conn4]struct{})
	}
}

func (o *ownDials) shard(a conn4) *ownDialShard {
	ip := a.local.Addr().As16()
	h := xxhash.Sum64(ip[:]) ^ uint64(a.local.Port())<<16 ^ uint64(a.remote.Port())
	return &o.shards[h%uint64(len(o.shards))]
}

func (o *ownDials) add(a conn4) {
	s := o.shard(a)
	s.mu.Lock()
	s.addrs[a] = struct{}{}
	s.mu.Unlock()
}

func (o *ownDials) remove(a conn4) {
	s := o.shard(a)
	s.mu.Lock()
	delete(s.addrs, a)
	s.mu.Unlock()
}

func (o *ownDials) has(a conn4) bool {
	s := o.shard(a)
	s.mu.Lock()
	_, ok := s.addrs[a]
	s.mu.Unlock()
	return ok
}
