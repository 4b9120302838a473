package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// udpFront is a UDP listener with its bound address.
type udpFront struct {
	*udpsession.Front
	key          string
	addr         *net.UDPAddr
	local        netip.AddrPort
	wildcard     bool
	own          listener.Own // its sockets, as front's
	noBackendLog *refusalLog
	rcvbuf       int // the receive_buffer its sockets were given (0: none)
}

// openUDP binds the UDP listener fc's sockets, one per loop.
func (s *Server) openUDP(fc Frontend, own listener.Own) (*bound, error) {
	if fc.SessionTimeout <= 0 || fc.MaxSessions <= 0 {
		return nil, errors.New("proxy: a UDP listener needs SessionTimeout and MaxSessions > 0")
	}
	socks, err := udpSockets(fc, len(s.loops), own)
	if err != nil {
		return nil, err
	}
	// Set on inherited sockets too: the running configuration's size, not
	// the one the sockets were bound with.
	if fc.ReceiveBuffer > 0 {
		granted, err := socks.SetReceiveBuffer(fc.ReceiveBuffer)
		if err != nil {
			socks.Close()
			return nil, err
		}
		s.warnRcvbuf(fc.Name, fc.ReceiveBuffer, granted)
	}
	ap := socks.Addr.AddrPort()
	f := &udpFront{Front: udpsession.NewFront(fc.Name, udpSettings(fc)), key: frontKey(fc), addr: socks.Addr,
		local: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), wildcard: socks.Wildcard, own: listener.Own{}, rcvbuf: fc.ReceiveBuffer}
	f.own.Add(socks.FDs)
	f.noBackendLog = newRefusalLog(time.Second, func(pool string, k int64) {
		s.log.Warn("datagrams dropped: no backend could take them", "listener", f.Name, "pool", pool, "dropped", k)
	})
	f.OnNoBackend = func() { f.noBackendLog.note(f.Settings().Pool.Name) }
	return &bound{udp: f, udpSock: socks}, nil
}

func (s *Server) attachUDP(b *bound, on func(*cpuLoop, func()) error, live bool) error {
	f, socks := b.udp, b.udpSock
	s.sh.Guard.ListenOn(uint16(socks.Addr.Port))
	err := s.spread(socks.FDs, false, func(l *cpuLoop, fd int) (err error) {
		if derr := on(l, func() { err = l.udp.AddListener(fd, f.Front, f.local, f.wildcard) }); derr != nil {
			return derr // never registered: closed with the rest below
		}
		return err
	})
	if err != nil {
		socks.Close()
		if live {
			for _, l := range s.loops {
				l.Do(func() { l.udp.DetachListener(f.Front) })
			}
		}
		return err
	}
	f.Publish()
	return nil
}

// warnRcvbuf says when the kernel granted a listener less receive buffer
// than its receive_buffer asks for: net.core.rmem_max capped it.
func (s *Server) warnRcvbuf(name string, asked, granted int) {
	if granted < asked {
		s.log.Warn("receive_buffer capped by the kernel: raise the sysctl to get it", "listener", name,
			"asked", asked, "effective", granted, "sysctl", listener.RcvbufSysctl)
	}
}

// reloadUDP gives a kept UDP listener fc's settings, and its
// receive_buffer to the sockets the loops hold. Back to 0, the sockets
// keep the size they have until a restart: 0 means l4lb leaves it alone.
func (s *Server) reloadUDP(f *udpFront, fc Frontend) {
	f.Set(udpSettings(fc))
	if fc.ReceiveBuffer == f.rcvbuf {
		return
	}
	if fc.ReceiveBuffer == 0 {
		s.log.Warn("reload: receive_buffer removed; the listener's sockets keep their size until a restart",
			"listener", f.Name, "size", f.rcvbuf)
		return
	}
	granted := -1
	for _, l := range s.loops {
		l.Do(func() {
			l.udp.EachSocket(f.Front, func(fd int) {
				g, err := listener.SetReceiveBuffer(fd, fc.ReceiveBuffer)
				if err != nil {
					s.log.Error("reload: receive_buffer not applied", "listener", f.Name, "error", err)
					return
				}
				if granted < 0 || g < granted {
					granted = g
				}
			})
		})
	}
	if granted >= 0 {
		s.warnRcvbuf(f.Name, fc.ReceiveBuffer, granted)
	}
	f.rcvbuf = fc.ReceiveBuffer
}

func udpSettings(fc Frontend) udpsession.Settings {
	set := udpsession.Settings{Pool: fc.Pool, SessionTimeout: fc.SessionTimeout, MaxSessions: int64(fc.MaxSessions),
		Responses: fc.Responses, Requests: fc.Requests, ReuseSockets: fc.ReuseSockets, NoAccessLog: fc.NoAccessLog}
	if fc.Policy != nil {
		set.Allow, set.Deny = fc.Policy.Allow, fc.Policy.Deny
	}
	return set
}

// UDPAddr returns the bound address of the named UDP listener.
func (s *Server) UDPAddr(name string) (*net.UDPAddr, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.udpFronts {
		if f.Name == name {
			return f.addr, nil
		}
	}
	return nil, fmt.Errorf("proxy: no UDP listener %q", name)
}

// Sessions is the number of UDP sessions open now, over all listeners.
func (s *Server) Sessions() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, f := range s.udpFronts {
		n += f.Sessions.Load()
	}
	return n
}
