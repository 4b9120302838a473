package server

import (
	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/relay"
)

// SetAccessLog makes the loops hand every ended TCP client (relayed or
// refused) and UDP session to q, with the records of open ones q asks
// for (accesslog.Queue.SetEvents); nil turns the access log off. Safe while serving: a
// reload may turn it on, off or to another queue. A queue must have been
// made for at least Loops() loops.
func (s *Server) SetAccessLog(q *accesslog.Queue) { s.sh.SetAccessLog(q) }

// AccessLogDropped is the number of access records the current queue lost
// (0 with the access log off).
func (s *Server) AccessLogDropped() int64 {
	if q := s.sh.AccessLog(); q != nil {
		return q.Dropped()
	}
	return 0
}

// ListenerCloses counts one TCP listener's ended clients by how they
// ended (relay.CloseReason), refused ones included.
type ListenerCloses struct {
	Name   string
	Closed [relay.NumCloseReasons]int64
	// Queued counts waits for a backend slot by how they ended, in the
	// order of relay.QueueResults; Sources the client addresses the
	// per-source limits track now.
	Queued [len(relay.QueueResults)]int64
	// RecoveryWaits counts waits of clients of an all-down pool for a
	// backend to come back, by how they ended, in the same order.
	RecoveryWaits [len(relay.QueueResults)]int64
	Sources       int64
}

// Closes returns the per-listener close counts, in the order of Stats.
func (s *Server) Closes() []ListenerCloses {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ListenerCloses, len(s.fronts))
	for i, f := range s.fronts {
		out[i].Name = f.Name
		for r := range relay.NumCloseReasons {
			out[i].Closed[r] = f.Closed[r].Load()
		}
		for r := range out[i].Queued {
			out[i].Queued[r] = f.Queued[r].Load()
			out[i].RecoveryWaits[r] = f.RecoveryWaits[r].Load()
		}
		if pol := f.Policy(); pol != nil {
			out[i].Sources = int64(pol.Sources.Sources())
		}
	}
	return out
}

// ListenerRoutes is one TCP listener's SNI routing counts: clients by
// route name, and inspections by how they ended (in the order of
// relay.InspectResults).
type ListenerRoutes struct {
	Name    string
	Routes  map[string]int64
	Results [len(relay.InspectResults)]int64
}

// Routes returns the counts of every listener with SNI routes.
func (s *Server) Routes() []ListenerRoutes {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []ListenerRoutes
	for _, f := range s.fronts {
		rt := f.Routing()
		if rt == nil {
			continue
		}
		lr := ListenerRoutes{Name: f.Name, Routes: rt.RouteClients()}
		for i := range lr.Results {
			lr.Results[i] = rt.Results[i].Load()
		}
		out = append(out, lr)
	}
	return out
}

// ListenerHandovers counts one listener's connections (TCP relays and
// queued clients, or UDP sessions) moved by binary upgrades: Out passed to
// the next process, In taken from the previous one.
type ListenerHandovers struct {
	Name, Protocol string
	Out, In        int64
}

// Handovers returns every listener's hand-over counts, TCP then UDP.
func (s *Server) Handovers() []ListenerHandovers {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ListenerHandovers, 0, len(s.fronts)+len(s.udpFronts))
	for _, f := range s.fronts {
		out = append(out, ListenerHandovers{Name: f.Name, Protocol: "tcp", Out: f.HandedOut.Load(), In: f.HandedIn.Load()})
	}
	for _, f := range s.udpFronts {
		out = append(out, ListenerHandovers{Name: f.Name, Protocol: "udp", Out: f.HandedOut.Load(), In: f.HandedIn.Load()})
	}
	return out
}
