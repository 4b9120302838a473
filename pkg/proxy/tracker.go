package proxy

import (
	"net"
	"sync"
)

// tracker remembers the client connections being served so a shutdown
// that runs out of time can cut them. It is sharded so accept loops on
// different CPUs rarely share a lock.
type tracker struct {
	shards [32]trackerShard
}

type trackerShard struct {
	mu    sync.Mutex
	conns map[*net.TCPConn]struct{}
	_     [64 - 16]byte // a shard per cache line: mutex (8) + map pointer (8)
}

func (t *tracker) init() {
	for i := range t.shards {
		t.shards[i].conns = make(map[*net.TCPConn]struct{})
	}
}

func (t *tracker) shard(c *net.TCPConn) *trackerShard {
	return &t.shards[(uintptr(ptrOf(c))>>6)%uintptr(len(t.shards))]
}

func (t *tracker) add(c *net.TCPConn) {
	s := t.shard(c)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

func (t *tracker) remove(c *net.TCPConn) {
	s := t.shard(c)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// cutAll resets every tracked client connection. Its relay sees the close
// and resets the backend side too: a cut stream must not end with a FIN
// that looks like a complete one.
func (t *tracker) cutAll() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for c := range s.conns {
			c.SetLinger(0)
			c.Close()
		}
		s.mu.Unlock()
	}
}
