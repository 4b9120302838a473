package srclimit

import (
	"hash/maphash"
	"net/netip"
	"time"
)

const nShards = 64 // a power of two

// Limiter is per-source admission for one listener, safe for concurrent
// use. A nil *Limiter admits everything.
type Limiter struct {
	shards [nShards]shard // first: each on its own cache lines
	p      params
	seed   maphash.Seed
	epoch  time.Time
}

// New returns a Limiter for cfg, or nil if cfg limits nothing (no cap and
// no rate): a nil *Limiter admits everything at the cost of a nil check.
func New(cfg Config) *Limiter {
	p := cfg.params()
	if p.maxConns == 0 && p.interval == 0 {
		return nil
	}
	l := &Limiter{p: p, epoch: cfg.Epoch, seed: maphash.MakeSeed()}
	if l.epoch.IsZero() {
		l.epoch = time.Now()
	}
	for i := range l.shards {
		l.shards[i].idx = make(map[[16]byte]int32)
	}
	return l
}

// Now is the Limiter's monotonic clock: nanoseconds since its epoch.
func (l *Limiter) Now() int64 {
	if l == nil {
		return 0
	}
	return int64(time.Since(l.epoch))
}

// key is the source addr counts against: its first v4bits or v6bits bits
// (Config.IPv4Prefix, IPv6Prefix) in 16 bytes. IPv4 and IPv4-mapped IPv6
// are one source, zones are dropped, and the invalid Addr is "::".
func (l *Limiter) key(addr netip.Addr) [16]byte {
	addr = addr.Unmap()
	bits := l.p.v6bits
	if addr.Is4() {
		bits = l.p.v4bits
	}
	if p, err := addr.Prefix(bits); err == nil { // the invalid Addr: a zero Prefix
		addr = p.Addr()
	}
	return addr.As16()
}

func (l *Limiter) shardOf(k *[16]byte) *shard { return &l.shards[l.shardIndex(k)] }

func (l *Limiter) shardIndex(k *[16]byte) uint64 {
	return maphash.Bytes(l.seed, k[:]) & (nShards - 1)
}

// Admit decides for a new connection from addr at time now (nanoseconds
// since the Limiter's epoch). The cap is checked first: a source at its cap
// gets OverConns, then a source with an empty bucket gets OverRate; a
// refused connection takes no token and leaves no count. On Admit the connection takes a token
// and counts against addr until Release(addr).
func (l *Limiter) Admit(addr netip.Addr, now int64) Verdict {
	if l == nil {
		return Admit
	}
	k := l.key(addr)
	s := l.shardOf(&k)
	s.mu.Lock()
	v := l.admit(s, k, s.at(now))
	s.mu.Unlock()
	return v
}

// admit is Admit's critical section.
func (l *Limiter) admit(s *shard, k [16]byte, now int64) Verdict {
	if l.p.interval > 0 {
		s.sweep(now, sweepPerAdmit)
	}
	var e *entry
	if i, ok := s.idx[k]; ok {
		e = &s.ents[i]
		if l.p.maxConns > 0 && e.conns >= l.p.maxConns {
			return OverConns
		}
	}
	var tat int64
	if l.p.interval > 0 {
		tat = now
		if e != nil && e.tat > now {
			tat = e.tat
		}
		tat += l.p.interval
		if tat-now > l.p.tau {
			return OverRate // a new entry never gets here: interval <= tau
		}
	}
	if e == nil {
		e = s.insert(k)
	}
	e.tat = tat
	if l.p.maxConns > 0 {
		e.conns++
	}
	return Admit
}

// Release ends the count of one admitted connection of addr. Without a cap
// it does nothing; called more often than Admit admitted it takes
// connections of the same source off the count.
func (l *Limiter) Release(addr netip.Addr) {
	if l == nil || l.p.maxConns == 0 {
		return
	}
	k := l.key(addr)
	s := l.shardOf(&k)
	s.mu.Lock()
	if i, ok := s.idx[k]; ok {
		e := &s.ents[i]
		if e.conns > 0 {
			e.conns--
		}
		if e.dead(s.clock) {
			s.remove(int(i))
		}
	}
	s.mu.Unlock()
}

// Sources is the number of source entries the Limiter holds now.
func (l *Limiter) Sources() int {
	if l == nil {
		return 0
	}
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.ents)
		s.mu.Unlock()
	}
	return n
}

// Hold counts a connection of addr that is open already (handed over by
// another process in a binary upgrade) until Release(addr): above the
// cap if need be, since refusing it would cut it, and with no token taken
// (it arrived long ago). Without a cap it does nothing.
func (l *Limiter) Hold(addr netip.Addr) {
	if l == nil || l.p.maxConns == 0 {
		return
	}
	k := l.key(addr)
	s := l.shardOf(&k)
	s.mu.Lock()
	if i, ok := s.idx[k]; ok {
		s.ents[i].conns++
	} else {
		s.insert(k).conns = 1
	}
	s.mu.Unlock()
}
