package proxy

import (
	"net"
	"sync"
)

// tracker remembers open connections so a shutdown that runs out of time
// can close them. It is sharded so accept loops on different CPUs rarely
// share a lock.
type tracker struct {
	shards [32]trackerShard
}

type trackerShard struct {
	mu    sync.Mutex
	conns map[*net.TCPConn]struct{}
	_     [40]byte // keep shards on separate cache lines
}

func (t *tracker) init() {
	for i := range t.shards {
		t.shards[i].conns = make(map[*net.TCPConn]struct{})
	}
}

func (t *tracker) shard(c *net.TCPConn) *trackerShard {
	return &t.shards[(uintptr(ptrOf(c))>>6)%uintptr(len(t.shards))]
}

func (t *tracker) add(c *net.TCPConn) *net.TCPConn {
	s := t.shard(c)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return c
}

func (t *tracker) remove(c *net.TCPConn) {
	s := t.shard(c)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (t *tracker) closeAll() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	}
}
