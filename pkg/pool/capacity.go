package pool

// Per-backend connection caps ([[pool.X.backend]] max_connections): a
// backend at its cap is skipped by the picker like an unusable one, in the
// picker's order, and the cap is exact across event loops because a dial
// takes its slot by compare-and-swap before connect(2).

// Full reports whether b is at its max_connections now (never without one).
func (b *Backend) Full() bool {
	return b.maxConns > 0 && b.active.Load() >= b.maxConns
}

// MaxConnections is b's cap; 0: none.
func (b *Backend) MaxConnections() int64 { return b.maxConns }

// acquire takes one of b's connection slots, or reports that none is free.
func (b *Backend) acquire() bool {
	if b.maxConns == 0 {
		b.active.Add(1)
		return true
	}
	for {
		cur := b.active.Load()
		if cur >= b.maxConns {
			return false
		}
		if b.active.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

// TryBeginDial is BeginDial for a client dial that must respect b's
// max_connections: ok is false, and nothing is counted, when b is full
// (another loop took the last slot since the plan). A force-try ignores
// the cap: it is the one connection rule 6 allows to a backend that is out.
func (p *Pool) TryBeginDial(b *Backend, force bool) (Dial, bool) {
	if !force && !b.acquire() {
		return Dial{}, false
	}
	if force {
		b.active.Add(1)
	}
	b.loadChanged()
	return p.beginDial(b, force), true
}

// Full reports whether the pool refuses new clients only for want of a
// slot: some backend of the set serving is usable (enabled, health-up,
// breaker closed, not draining, weight above 0) and every such one is at
// its max_connections. The loop then queues the client for queue_timeout,
// or refuses it as backend_cap. Full primaries are no reason to send a
// client to the backups (backup.go).
func (p *Pool) Full() bool {
	s := p.serving()
	return s != nil && s.full()
}

// QueueTimeout is how long a client may wait for a slot when the pool is
// Full; 0: refused at once.
func (p *Pool) QueueTimeout() int64 { return int64(p.cfg.QueueTimeout) }

// loadChanged tells the picker that b's active count moved (least-conn's
// heap and bounded-load hashing keep it ordered without a scan).
// After a reload the active count is shared with the backend that carries
// b on, whose picker is the one to tell.
func (b *Backend) loadChanged() {
	c := b.current()
	if n := c.notify.Load(); n != nil {
		(*n)(c.slot)
	}
}
