package proxy

import (
	"net"
	"sync"
	"unsafe"

	"github.com/l4lb/l4lb/pkg/pool"
)

// tracker remembers the client connections being served so a shutdown
// that runs out of time can cut them. It is sharded so accept loops on
// different CPUs rarely share a lock.
type tracker struct {
	shards [32]trackerShard
}

type trackerShard struct {
	mu    sync.Mutex
	conns map[*net.TCPConn]*pool.Relaying // nil until the relay starts
	_     [64 - 16]byte                   // a shard per cache line: mutex (8) + map pointer (8)
}

func (t *tracker) init() {
	for i := range t.shards {
		t.shards[i].conns = make(map[*net.TCPConn]*pool.Relaying)
	}
}

func (t *tracker) shard(c *net.TCPConn) *trackerShard {
	return &t.shards[(uintptr(unsafe.Pointer(c))>>6)%uintptr(len(t.shards))]
}

func (t *tracker) add(c *net.TCPConn) {
	s := t.shard(c)
	s.mu.Lock()
	s.conns[c] = nil
	s.mu.Unlock()
}

// relaying records that c's relay has started.
func (t *tracker) relaying(c *net.TCPConn, r *pool.Relaying) {
	s := t.shard(c)
	s.mu.Lock()
	s.conns[c] = r
	s.mu.Unlock()
}

func (t *tracker) remove(c *net.TCPConn) {
	s := t.shard(c)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// cutAll resets every tracked connection: relays are cut on both sides
// (a cut stream must not end with a FIN that looks like a complete one),
// clients still waiting for their dial are reset.
func (t *tracker) cutAll() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for c, r := range s.conns {
			if r != nil {
				r.Cut()
			} else {
				c.SetLinger(0)
				c.Close()
			}
		}
		s.mu.Unlock()
	}
}
