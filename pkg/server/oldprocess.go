package server

import (
	"context"
	"sync"
)

// The client connections an upgrade's old process still holds, as this
// server counts them against max_connections (relay.Shared.Elsewhere).
// They count only when max_connections is set in the file: a cap for the
// service, which the two processes share while both serve. One derived
// from the fd limit (max_connections = 0) is this process's fd budget,
// and the old process's connections hold the old process's fds, so they
// leave it whole. Queued clients adopted from the old process count
// either way until they go (FlowsDone): their fds are here already, and
// neither process's count holds them meanwhile.

// oldProcess is what the old process holds, and what Elsewhere is made of.
type oldProcess struct {
	mu       sync.Mutex
	reported int64 // as the old process last reported them (HeldElsewhere)
	queued   int64 // adopted queued clients held until FlowsDone
	derived  bool  // max_connections came from the fd limit
	changed  chan struct{}
}

// elsewhere stores what new clients count beside Active. Under o.mu.
func (s *Server) elsewhere() {
	o := &s.old
	n := o.queued
	if !o.derived {
		n += o.reported
	}
	s.sh.Elsewhere.Store(n)
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
	s.elsewhere()
	if s.old.changed != nil {
		close(s.old.changed)
		s.old.changed = nil
	}
}

// SetCapFromFDLimit says whether max_connections was derived from the fd
// limit (max_connections = 0 in the file): the connections an upgrade's
// old process holds then do not count against it. A reload that sets or
// clears the key calls it after Reload.
func (s *Server) SetCapFromFDLimit(derived bool) {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	s.old.derived = derived
	s.elsewhere()
}

// holdQueued counts k adopted queued clients more (k < 0: fewer) until
// they go.
func (s *Server) holdQueued(k int) {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	s.old.queued += int64(k)
	s.elsewhere()
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

// oldCounted is how many of the old process's connections new clients
// count now (the cap's refusal line).
func (s *Server) oldCounted() int64 {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	if s.old.derived {
		return 0
	}
	return s.old.reported
}

// HeldByOldProcess is how many client connections the previous process of
// an upgrade holds, as it last reported them.
func (s *Server) HeldByOldProcess() int64 {
	s.old.mu.Lock()
	defer s.old.mu.Unlock()
	return s.old.reported
}
