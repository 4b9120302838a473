package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/loop"
)

// bindUDP opens one socket per loop for the UDP listener fc and hands
// each loop its own.
func (s *Server) bindUDP(fc Frontend) error {
	if fc.SessionTimeout <= 0 || fc.MaxSessions <= 0 {
		return errors.New("proxy: a UDP listener needs SessionTimeout and MaxSessions > 0")
	}
	socks, err := listener.BindUDP(fc.Name, fc.Bind, len(s.loops))
	if err != nil {
		return err
	}
	f := loop.NewUDPFront(fc.Name, udpSettings(fc))
	noBackend := newRefusalLog(time.Second, func(k int64) {
		s.log.Warn("datagrams dropped: no backend could take them", "listener", fc.Name, "pool", fc.Pool.Name, "dropped", k)
	})
	f.OnNoBackend = noBackend.note
	s.stopLogs = append(s.stopLogs, noBackend.stop)
	s.sh.ListenOn(uint16(socks.Addr.Port))
	ap := socks.Addr.AddrPort()
	local := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	for i, l := range s.loops {
		if err := l.AddUDPListener(socks.FDs[i], f, local, socks.Wildcard); err != nil {
			socks.Close()
			return err
		}
		socks.FDs[i] = -1 // the loop owns it now
	}
	s.udpFronts = append(s.udpFronts, f)
	s.udpAddrs = append(s.udpAddrs, socks.Addr)
	return nil
}

func udpSettings(fc Frontend) loop.UDPSettings {
	return loop.UDPSettings{Pool: fc.Pool, SessionTimeout: fc.SessionTimeout, MaxSessions: int64(fc.MaxSessions),
		Responses: fc.Responses, Requests: fc.Requests}
}

// UDPAddr returns the bound address of the named UDP listener.
func (s *Server) UDPAddr(name string) (*net.UDPAddr, error) {
	for i, f := range s.udpFronts {
		if f.Name == name {
			return s.udpAddrs[i], nil
		}
	}
	return nil, fmt.Errorf("proxy: no UDP listener %q", name)
}

// Sessions is the number of UDP sessions open now, over all listeners.
func (s *Server) Sessions() int64 {
	var n int64
	for _, f := range s.udpFronts {
		n += f.Sessions.Load()
	}
	return n
}
