package server

import (
	"context"
	"sync"

	"github.com/l4lb/l4lb/pkg/relay"
)

// The client connections an upgrade's old process still holds, as this
// server counts them against max_connections (relay.Cap.Elsewhere).
// They count only when max_connections is set in the file: a cap for the
// service, which the two processes share while both serve. One derived
// from the fd limit (max_connections = 0) is this process's fd budget,
// and the old process's connections hold the old process's fds, so they
// leave it whole. Queued clients adopted from the old process count
// either way until they go (FlowsDone): their fds are here already, and
// neither process's count holds them meanwhile.
//
// Whether they count is part of the cap: a reload that sets or clears
// max_connections changes both in one store (relay.Shared.SetCap), so no
// client is admitted against the new cap with the old count.

// ConnCap is max_connections as the server applies it (New, Reload).
type ConnCap struct {
	MaxConnections int // > 0
	// Derived: MaxConnections came from the fd limit (max_connections =
	// 0), this process's fds alone: the old process's connections do not
	// count against it.
	Derived bool
}

// oldProcess is what the old process holds, and with the cap what
// relay.Cap is made of.
type oldProcess struct {
	mu       sync.Mutex
	reported int64 // as the old process last reported them (HeldElsewhere)
	queued   int64 // adopted queued clients held until FlowsDone
	cap      ConnCap
	changed  chan struct{}
}

// publishCap stores the cap and what new clients count beside Active as
// one value, the one the loops admit against. Under o.mu.
func (s *Server) publishCap() {
	o := &s.old
	n := o.queued
	if !o.cap.Derived {
		n += o.reported
	}
	s.sh.SetCap(relay.Cap{Max: int64(o.cap.MaxConnections), Elsewhere: n})
}

// setCap makes c the cap on client connections from now on.
func (s *Server) setCap(c ConnCap) {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	s.old.cap = c
	s.publishCap()
}

// Holding is how many client connections the server counts against
// max_connections: its own and those an older process of an upgrade still
// holds (handoff.FlowHolder), which the next process counts in turn
// (whether its own cap is derived or not: the next one's may be set).
func (s *Server) Holding() int64 {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	return s.sh.Active.Load() + s.old.queued + s.old.reported
}

// HeldElsewhere says the previous process of an upgrade still holds n
// client connections (handoff.FlowHolder); 0 once it holds none, or is
// gone. New clients count them while max_connections is set in the file.
func (s *Server) HeldElsewhere(n int64) {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	s.old.reported = max(n, 0)
	s.publishCap()
	if s.old.changed != nil {
		close(s.old.changed)
		s.old.changed = nil
	}
}

// holdQueued counts k adopted queued clients more (k < 0: fewer) until
// they go.
func (s *Server) holdQueued(k int) {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	s.old.queued += int64(k)
	s.publishCap()
}

// AwaitOldProcess returns once the previous process of an upgrade holds
// no client connection (as it reports, or it is gone), or when ctx is
// done: an old process upgraded in turn waits there before it exits, so
// its successor goes on counting what the one before still holds.
func (s *Server) AwaitOldProcess(ctx context.Context) error {
	for {
		s.old.mu.Lock()
		if s.old.reported == 0 {
			s.old.mu.Unlock()
			return nil
		}
		if s.old.changed == nil {
			s.old.changed = make(chan struct{})
		}
		changed := s.old.changed
		s.old.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-changed:
		}
	}
}

// capNow is the cap now and how many of the old process's connections
// new clients count against it (the cap's refusal line), as one.
func (s *Server) capNow() (maxConns, oldCounted int64) {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	if s.old.cap.Derived {
		return int64(s.old.cap.MaxConnections), 0
	}
	return int64(s.old.cap.MaxConnections), s.old.reported
}

// HeldByOldProcess is how many client connections the previous process of
// an upgrade holds, as it last reported them.
func (s *Server) HeldByOldProcess() int64 {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	return s.old.reported
}
