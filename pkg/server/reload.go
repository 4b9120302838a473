package server

import (
	"errors"
	"fmt"
	"maps"

	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// ReloadStats says what a reload changed.
type ReloadStats struct {
	Kept, Added, Removed int
}

// Reload makes the server serve fronts from now on, without a moment in
// which a listener that stays refuses a client. Listeners are matched by
// protocol and address: one that stays keeps its sockets (so no SYN and no
// datagram queued on them is lost) and takes its new pool and settings;
// new ones are bound first, so a busy address fails the reload before
// anything changed; removed ones stop accepting while their connections
// finish (a removed UDP listener ends its sessions). Connections already
// open keep the pool they were accepted with, and follow their listener's
// access_log (a moved one's: the new listener of its name). c becomes the
// cap on client connections, with whether it was derived from the fd
// limit (so whether an upgrade's old process's connections count against
// it) in the same step.
//
// A listener moved to an overlapping address of the same port
// ("127.0.0.1:P" to "0.0.0.0:P", or back) is a removed one and a new one:
// the new sockets are bound beside the removed listener's (which do not
// count as busy: listener.Own), serve before those close, and take the
// old address's new clients from then on.
func (s *Server) Reload(fronts []Frontend, c ConnCap) (ReloadStats, error) {
	var st ReloadStats
	if c.MaxConnections <= 0 {
		return st, errors.New("proxy: MaxConnections must be > 0")
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if !s.served || s.closed {
		return st, errors.New("proxy: reload of a server that is not serving")
	}

	s.mu.RLock()
	tcpNow := make(map[string]*front, len(s.fronts))
	for _, f := range s.fronts {
		tcpNow[f.key] = f
	}
	udpNow := make(map[string]*udpFront, len(s.udpFronts))
	for _, f := range s.udpFronts {
		udpNow[f.key] = f
	}
	s.mu.RUnlock()

	// Plan, and refuse what a reload cannot do, before touching anything.
	var keepTCP []*front
	var keepUDP []*udpFront
	var add []Frontend
	var keptFC []Frontend
	seen := map[string]bool{}
	for _, fc := range fronts {
		k := frontKey(fc)
		if seen[k] {
			return st, fmt.Errorf("proxy: two listeners on %s", k)
		}
		seen[k] = true
		var name string
		switch {
		case tcpNow[k] != nil:
			name = tcpNow[k].Name
			keepTCP = append(keepTCP, tcpNow[k])
		case udpNow[k] != nil:
			name = udpNow[k].Name
			keepUDP = append(keepUDP, udpNow[k])
		default:
			add = append(add, fc)
			continue
		}
		if name != fc.Name {
			return st, fmt.Errorf("listener on %s is %q in the running configuration and %q in the new one: a reload keeps a listener's sockets and cannot rename it; keep the name, or rename it with an upgrade (l4lb upgrade)",
				k, name, fc.Name)
		}
		keptFC = append(keptFC, fc)
	}

	// Bind every new listener first: a busy address fails here. The
	// sockets of the listeners this reload removes are still open, and a
	// new listener may overlap them.
	releasing := listener.Own{}
	for k, f := range tcpNow {
		if !seen[k] {
			maps.Copy(releasing, f.own)
		}
	}
	for k, f := range udpNow {
		if !seen[k] {
			maps.Copy(releasing, f.own)
		}
	}
	var opened []*bound
	for _, fc := range add {
		b, err := s.open(fc, releasing)
		if err != nil {
			for _, o := range opened {
				o.close()
			}
			return st, err
		}
		opened = append(opened, b)
	}

	// From here nothing fails.
	s.setCap(c)
	ti, ui := 0, 0
	for _, fc := range keptFC {
		if fc.Protocol == "udp" {
			s.reloadUDP(keepUDP[ui], fc)
			ui++
		} else {
			keepTCP[ti].SetPool(fc.Pool)
			keepTCP[ti].SetPolicy(fc.Policy)
			keepTCP[ti].SetAccessLog(!fc.NoAccessLog)
			fc.Routing.CarryCounts(keepTCP[ti].Routing())
			keepTCP[ti].SetRouting(fc.Routing)
			s.setKeepalive(keepTCP[ti].Front, fc.Keepalive)
			ti++
		}
	}
	s.followAccessLog(opened, tcpNow, seen)
	for _, b := range opened {
		if err := s.attach(b, true); err != nil {
			// A loop refused to watch the socket (epoll out of memory):
			// the listener is left out and said so; the rest applies.
			s.log.Error("reload: listener not started", "error", err)
			continue
		}
		s.add(b)
		st.Added++
	}
	st.Kept = len(keptFC)

	// Removed listeners: stop accepting, let connections finish.
	for k, f := range tcpNow {
		if seen[k] {
			continue
		}
		for _, l := range s.loops {
			l.Do(func() { l.tcp.DetachListener(f.Front) })
		}
		s.drop(f, nil)
		st.Removed++
	}
	for k, f := range udpNow {
		if seen[k] {
			continue
		}
		for _, l := range s.loops {
			l.Do(func() { l.udp.DetachListener(f.Front) })
		}
		s.drop(nil, f)
		st.Removed++
	}
	s.logListeners(opened)
	return st, nil
}

// followAccessLog makes the connections of a TCP listener this reload
// removes follow the new listener of its name (its address changed), so
// that access_log applies to them as to a kept listener's. Before the
// new ones serve.
func (s *Server) followAccessLog(opened []*bound, tcpNow map[string]*front, seen map[string]bool) {
	for _, b := range opened {
		if b.tcp == nil {
			continue
		}
		for k, f := range tcpNow {
			if !seen[k] && f.Name == b.tcp.Name {
				b.tcp.FollowAccessLog(f.Front)
			}
		}
	}
}

// drop forgets a removed listener.
func (s *Server) drop(tf *front, uf *udpFront) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tf != nil {
		s.fronts = without(s.fronts, tf)
	}
	if uf != nil {
		s.udpFronts = without(s.udpFronts, uf)
	}
}

func without[T comparable](list []T, x T) []T {
	out := list[:0:0]
	for _, v := range list {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func (s *Server) logListeners(opened []*bound) {
	for _, b := range opened {
		if b.udp != nil {
			s.log.Info("listener started", "listener", b.udp.Name, "protocol", "udp", "addr", b.udp.addr.String(), "loops", len(s.loops))
		} else {
			s.log.Info("listener started", "listener", b.tcp.Name, "protocol", "tcp", "addr", b.tcp.addr.String(), "loops", len(s.loops))
		}
	}
}

// setKeepalive applies a reloaded listener's client-side keepalive to its
// listening sockets (the loops hold them): clients accepted from then on
// inherit it. An error is logged; the listener keeps serving.
func (s *Server) setKeepalive(f *relay.Front, ka sockopt.Keepalive) {
	for _, l := range s.loops {
		l.Do(func() {
			if err := l.tcp.ListenerKeepalive(f, ka); err != nil {
				s.log.Error("reload: listener keepalive not applied", "listener", f.Name, "error", err)
			}
		})
	}
}
