package server

import (
	"fmt"
	"slices"
	"sync"

	"github.com/l4lb/l4lb/pkg/flow"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// The server's side of a binary upgrade's hand-over of established
// connections (handoff.FlowHolder): the old process's server detaches
// them loop by loop; the new process's server finds each one's listener,
// pool and backend among its own and spreads the connections over its
// loops, each adopting its share.

// DetachFlows moves established connections off the loops into b while
// it has room (handoff.FlowHolder). The loops must be running.
//
// Clients queued for a slot go first (relay.Loop.DetachQueued says why),
// then UDP sessions: until a session is adopted, its client's datagrams
// reach the new process, which would open another session for them.
func (s *Server) DetachFlows(b *flow.Batch) (pending int) {
	for _, detach := range []func(l *cpuLoop) int{
		func(l *cpuLoop) int { return l.tcp.DetachQueued(b) },
		func(l *cpuLoop) int { return l.udp.Detach(b) },
		func(l *cpuLoop) int { return l.tcp.Detach(b) },
	} {
		for _, l := range s.loops {
			if !b.Room() {
				return pending + 1
			}
			l.Do(func() { pending += detach(l) })
		}
	}
	return pending
}

// AdoptFlows puts b's connections together on the loops, held still, and
// returns what lets them run and the records no listener, pool or backend
// of this server can carry on (handoff.FlowHolder).
func (s *Server) AdoptFlows(b *flow.Batch, stay bool) (run func(), refused flow.Refused) {
	if s.shuttingDown() {
		// Adopted now, they would be cut by the drain under way: they
		// stay with the process that passed them.
		return func() {}, flow.All(b)
	}
	var firstErr error
	refuse := func(list *[]int, i int, err error) {
		*list = append(*list, i)
		if firstErr == nil {
			firstErr = err
		}
	}
	// Each loop adopts its share: TCP records go round the loops; a UDP
	// session goes to the loop reading the socket its client's datagrams
	// arrive on.
	jobs := make([][]adoptJob, len(s.loops))
	add := func(j adoptJob) {
		k := int(s.adoptNext.Add(1) % uint64(len(s.loops)))
		jobs[k] = append(jobs[k], j)
	}
	for i := range b.Relays {
		r := &b.Relays[i]
		f, p, be, err := s.relayHome(r.Listener, r.Pool, r.Backend, r.BackendAddr)
		if err != nil {
			refuse(&refused.Relays, i, err)
			continue
		}
		if be.Departed() {
			r.Verdict = nil // no breaker here to judge the dial
		}
		add(adoptJob{func(l *cpuLoop) (adopted, error) { return l.tcp.AdoptRelay(r, b, f, p, be) }, &refused.Relays, i, false})
	}
	for i := range b.Queued {
		q := &b.Queued[i]
		f, p, _, err := s.relayHome(q.Listener, q.Pool, "", "")
		if err != nil {
			refuse(&refused.Queued, i, err)
			continue
		}
		add(adoptJob{func(l *cpuLoop) (adopted, error) { return l.tcp.AdoptQueued(q, b, f, p) }, &refused.Queued, i, !stay})
	}
	for i := range b.Sessions {
		r := &b.Sessions[i]
		f, p, be, err := s.sessionHome(r.Listener, r.Pool, r.Backend, r.BackendAddr)
		if err != nil {
			refuse(&refused.Sessions, i, err)
			continue
		}
		if be.Departed() {
			r.Verdict = nil
		}
		k := slices.IndexFunc(s.loops, func(l *cpuLoop) bool { return l.udp.Serves(r.Socket) })
		if k < 0 {
			refuse(&refused.Sessions, i, fmt.Errorf("no loop reads the socket of listener %q the session's client sends to", r.Listener))
			continue
		}
		jobs[k] = append(jobs[k], adoptJob{func(l *cpuLoop) (adopted, error) { return l.udp.AdoptSession(r, b, f, p, be) }, &refused.Sessions, i, false})
	}
	// The loops adopt their shares at once, each on its own goroutine.
	took := make([][]adopted, len(s.loops))
	later := make([][]adopted, len(s.loops)) // queued clients, until FlowsDone
	errs := make([][]error, len(s.loops))
	ran := make([]bool, len(s.loops))
	var wg sync.WaitGroup
	for k, l := range s.loops {
		if len(jobs[k]) == 0 {
			continue
		}
		errs[k] = make([]error, len(jobs[k]))
		wg.Go(func() {
			ran[k] = l.Do(func() {
				for n, j := range jobs[k] {
					a, err := j.adopt(l)
					if err != nil {
						errs[k][n] = err
						continue
					}
					if stay {
						a.Stay()
					}
					if j.atDone {
						later[k] = append(later[k], a)
					} else {
						took[k] = append(took[k], a)
					}
				}
			})
		})
	}
	wg.Wait()
	for k := range s.loops {
		for n, j := range jobs[k] {
			if !ran[k] {
				refuse(j.refused, j.i, errLoopStopped)
			} else if errs[k][n] != nil {
				refuse(j.refused, j.i, errs[k][n])
			}
		}
	}
	if refused.Len() > 0 {
		s.log.Warn("upgrade: connections refused in a hand-over; the process that passed them keeps them",
			"refused", refused.Len(), "first_reason", firstErr)
	}
	return func() {
		s.goAll(took)
		s.heldMu.Lock()
		if s.held == nil {
			s.held = make([][]adopted, len(s.loops))
		}
		n := 0
		for k := range later {
			s.held[k] = append(s.held[k], later[k]...)
			n += len(later[k])
		}
		s.holdQueued(n) // before the caller lowers what the old process holds
		s.heldMu.Unlock()
	}, refused
}

// FlowsDone lets the queued clients a hand-over brought go on, once every
// relay that holds a slot of their pools is counted here
// (handoff.FlowHolder).
func (s *Server) FlowsDone() {
	s.heldMu.Lock()
	held := s.held
	s.held = nil
	s.heldMu.Unlock()
	s.goAll(held)
	n := 0
	for _, as := range held {
		n += len(as)
	}
	s.holdQueued(-n) // counted in Active now
}

// goAll lets adopted connections go, each on its loop, and returns once
// they have (each counts in Active from then: the caller may lower the
// count of what the old process holds), or their loop stopped.
func (s *Server) goAll(byLoop [][]adopted) {
	var wg sync.WaitGroup
	for k, as := range byLoop {
		if len(as) > 0 {
			wg.Go(func() {
				s.loops[k].Do(func() {
					for _, a := range as {
						a.Go()
					}
				})
			})
		}
	}
	wg.Wait()
}

// shuttingDown reports whether Shutdown has begun.
func (s *Server) shuttingDown() bool {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	return s.closed
}

// adoptJob is one record's adoption on a loop, and the refusal list its
// index joins if it fails.
type adoptJob struct {
	adopt   func(*cpuLoop) (adopted, error)
	refused *[]int
	i       int
	atDone  bool // goes at FlowsDone, not with the batch
}

// adopted is a connection put together on a loop, held still until Go
// (relay.Adopted, udpsession.Adopted).
type adopted interface {
	Go()
	Stay()
}

// relayHome finds a handed-over TCP connection's listener, pool and
// backend (none asked for: backendID ""). The pool may be one the
// listener no longer feeds (a reload moved it while the connection was
// open), as long as some listener still does, itself or through one of
// its SNI routes (a routed client's pool is often one only a route
// reaches).
func (s *Server) relayHome(listener, poolName, backendID, backendAddr string) (*relay.Front, *pool.Pool, *pool.Backend, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return home("TCP", s.fronts, func(f *front) (string, *relay.Front) { return f.Name, f.Front }, tcpFeeds,
		listener, poolName, backendID, backendAddr)
}

// tcpFeeds is the pool named name that f sends clients to, by its own
// pool or a route's, or nil.
func tcpFeeds(f *front, name string) *pool.Pool {
	if p := f.Pool(); p.Name == name {
		return p
	}
	if r := f.Routing(); r != nil {
		for _, route := range r.Routes {
			if route.Pool.Name == name {
				return route.Pool
			}
		}
	}
	return nil
}

// sessionHome is relayHome for a UDP session.
func (s *Server) sessionHome(listener, poolName, backendID, backendAddr string) (*udpsession.Front, *pool.Pool, *pool.Backend, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return home("UDP", s.udpFronts, func(f *udpFront) (string, *udpsession.Front) { return f.Name, f.Front }, udpFeeds,
		listener, poolName, backendID, backendAddr)
}

// udpFeeds is the pool named name that f sends sessions to, or nil (UDP
// listeners have no routes).
func udpFeeds(f *udpFront, name string) *pool.Pool {
	if p := f.Settings().Pool; p.Name == name {
		return p
	}
	return nil
}

// home is relayHome and sessionHome over the listeners of one protocol,
// each seen as its name and loops' front (see), and as the pool of a
// name it feeds (feeds).
func home[L, F any](protocol string, listeners []L, see func(L) (string, F), feeds func(L, string) *pool.Pool,
	listener, poolName, backendID, backendAddr string) (f F, p *pool.Pool, be *pool.Backend, err error) {
	found := false
	for _, l := range listeners {
		name, lf := see(l)
		if name == listener {
			f, found = lf, true
		}
		if p == nil {
			p = feeds(l, poolName)
		}
	}
	switch {
	case !found:
		return f, nil, nil, fmt.Errorf("no %s listener %q", protocol, listener)
	case p == nil:
		return f, nil, nil, fmt.Errorf("no pool %q behind a %s listener", poolName, protocol)
	case backendID == "":
		return f, p, nil, nil
	}
	if be, ok := p.ByIdentity(backendID); ok && be.Addr == backendAddr {
		return f, p, be, nil
	}
	// Made to a backend that has left the pool since: it finishes here as
	// it would have there (pool.Departed).
	be, err = p.Departed(backendID, backendAddr)
	return f, p, be, err
}
