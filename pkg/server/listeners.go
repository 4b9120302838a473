package server

// ListenerPool is a listener's name, protocol and the pool its new
// clients are dialed from (SNI routes aside): what the admin API's pool
// JSON lists as the pool's listeners.
type ListenerPool struct {
	Name, Protocol, Pool string
}

// ListenerPools lists every listener with its pool now (a reload may
// swap it), TCP listeners first, each in configuration order.
func (s *Server) ListenerPools() []ListenerPool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ListenerPool, 0, len(s.fronts)+len(s.udpFronts))
	for _, f := range s.fronts {
		if p := f.Pool(); p != nil {
			out = append(out, ListenerPool{Name: f.Name, Protocol: "tcp", Pool: p.Name})
		}
	}
	for _, f := range s.udpFronts {
		if st := f.Settings(); st != nil && st.Pool != nil {
			out = append(out, ListenerPool{Name: f.Name, Protocol: "udp", Pool: st.Pool.Name})
		}
	}
	return out
}
