package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/loop"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/splice"
)

// Frontend is one listener and the pool it feeds.
type Frontend struct {
	Name     string
	Bind     string
	Protocol string // "tcp" (or "") | "udp"
	Backlog  int    // tcp only
	Pool     *pool.Pool

	// UDP listeners only; see loop.UDPFront.
	SessionTimeout      time.Duration
	MaxSessions         int
	Responses, Requests int
}

// Config describes a Server.
type Config struct {
	Frontends []Frontend
	// Loops is the number of event loops, each with its own socket per
	// listener (SO_REUSEPORT); 0: one per CPU.
	Loops int
	// MaxConnections caps client connections open at once; past it new
	// clients are accepted and closed at once. Must be > 0.
	MaxConnections int
	// Pipes supplies splice pipes; nil relays by copy only.
	Pipes *splice.PipePool
	// IsLocal reports whether an address belongs to this host (loop
	// detection); nil: loopback only.
	IsLocal func(netip.Addr) bool
	Logger  *slog.Logger
}

// Server runs the listeners of one configuration on its event loops.
type Server struct {
	sh        *loop.Shared
	loops     []*loop.Loop
	fronts    []*front
	udpFronts []*loop.UDPFront
	udpAddrs  []*net.UDPAddr
	log       *slog.Logger
	served    bool
	closed    bool
	// stopLogs flush the rate-limited refusal logs at the end.
	stopLogs []func()
}

type front struct {
	*loop.Front
	addr *net.TCPAddr
	// Clients refused for want of a backend, and connection loops, are
	// logged at most once a second each, with a count.
	noBackendLog *refusalLog
	loopLog      *refusalLog
}

// New creates the event loops and binds every listener (so a busy address
// fails here) without accepting yet. A Server that is never served must
// still be shut down to release its addresses.
func New(cfg Config) (*Server, error) {
	if cfg.MaxConnections <= 0 {
		return nil, errors.New("proxy: MaxConnections must be > 0")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := cfg.Loops
	if n <= 0 {
		n = runtime.NumCPU()
	}
	s := &Server{sh: loop.NewShared(int64(cfg.MaxConnections), cfg.Pipes, log), log: log}
	s.sh.IsLocal = cfg.IsLocal
	capLog := newRefusalLog(time.Second, func(k int64) {
		log.Warn("clients refused: connection cap reached", "max_connections", cfg.MaxConnections, "refused", k)
	})
	s.sh.OnCap = capLog.note
	s.stopLogs = append(s.stopLogs, capLog.stop)
	for i := range n {
		l, err := loop.New(i, s.sh)
		if err != nil {
			s.release()
			return nil, err
		}
		s.loops = append(s.loops, l)
	}
	for _, fc := range cfg.Frontends {
		if fc.Protocol == "udp" {
			if err := s.bindUDP(fc); err != nil {
				s.release()
				return nil, err
			}
			continue
		}
		f, err := s.bind(fc, n)
		if err != nil {
			s.release()
			return nil, err
		}
		s.fronts = append(s.fronts, f)
	}
	return s, nil
}

// bind opens one socket per loop for fc and hands each loop its own.
func (s *Server) bind(fc Frontend, n int) (*front, error) {
	socks, err := listener.Bind(fc.Name, fc.Bind, fc.Backlog, n)
	if err != nil {
		return nil, err
	}
	f := &front{Front: loop.NewFront(fc.Name, fc.Pool), addr: socks.Addr}
	s.sh.ListenOn(uint16(socks.Addr.Port))
	f.noBackendLog = newRefusalLog(time.Second, func(k int64) {
		s.log.Warn("clients refused: no backend could be reached", "listener", fc.Name, "pool", fc.Pool.Name, "refused", k)
	})
	f.loopLog = newRefusalLog(time.Second, func(k int64) {
		s.log.Error("connection loop: a backend of the pool leads back to l4lb itself; clients reset",
			"listener", fc.Name, "pool", fc.Pool.Name, "refused", k)
	})
	f.OnNoBackend, f.OnLoop = f.noBackendLog.note, f.loopLog.note
	s.stopLogs = append(s.stopLogs, f.noBackendLog.stop, f.loopLog.stop)
	for i, l := range s.loops {
		if err := l.AddListener(socks.FDs[i], f.Front); err != nil {
			socks.Close()
			return nil, err
		}
		socks.FDs[i] = -1 // the loop owns it now
	}
	return f, nil
}

// Serve starts the event loops and returns at once.
func (s *Server) Serve() {
	if s.served || s.closed {
		return
	}
	s.served = true
	for _, l := range s.loops {
		l.Start()
	}
	for _, f := range s.fronts {
		s.log.Info("listener started", "listener", f.Name, "protocol", "tcp", "addr", f.addr.String(), "loops", len(s.loops))
	}
	for i, f := range s.udpFronts {
		s.log.Info("listener started", "listener", f.Name, "protocol", "udp", "addr", s.udpAddrs[i].String(), "loops", len(s.loops))
	}
}

// Addr returns the bound address of the named listener.
func (s *Server) Addr(name string) (*net.TCPAddr, error) {
	for _, f := range s.fronts {
		if f.Name == name {
			return f.addr, nil
		}
	}
	return nil, fmt.Errorf("proxy: no listener %q", name)
}

// Loops is the number of event loops.
func (s *Server) Loops() int { return len(s.loops) }

// Active is the number of client connections being served now.
func (s *Server) Active() int64 { return s.sh.Active.Load() }

// ListenerStats counts client connections of one listener by result.
type ListenerStats struct {
	Name                 string
	OK, Failed, Rejected int64
	AcceptErrors         int64
	// Loops counts clients that were l4lb's own backend connections (a
	// backend leading back to a listener); they are also in Rejected.
	Loops int64
}

// Stats returns the per-listener counters.
func (s *Server) Stats() []ListenerStats {
	out := make([]ListenerStats, len(s.fronts))
	for i, f := range s.fronts {
		out[i] = ListenerStats{Name: f.Name, OK: f.OK.Load(), Failed: f.Failed.Load(),
			Rejected: f.Rejected.Load(), AcceptErrors: f.AcceptErrors.Load(), Loops: f.Loops.Load()}
	}
	return out
}

// PathBytes reports the bytes relayed by splice and by copy.
func (s *Server) PathBytes() (spliced, copied int64) {
	return s.sh.Spliced.Load(), s.sh.Copied.Load()
}

// Shutdown stops accepting, waits for open connections to finish until
// ctx is done, then resets what is left and stops the loops.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.served {
		s.release()
		return nil
	}
	for _, l := range s.loops {
		l.CloseListeners()
	}
	var err error
	if !s.waitIdle(ctx.Done()) {
		left := s.Active() // the caller logs why the drain ended (deadline or signal)
		for _, l := range s.loops {
			l.CutAll()
		}
		s.waitIdle(nil)
		err = fmt.Errorf("proxy: reset %d connections still open when the drain ended: %w", left, context.Cause(ctx))
	}
	s.release()
	return err
}

// waitIdle polls until no connection is open, or until stop is closed
// (false then). Connections end on the loops; a drain has no hurry that
// polling every few ms would not meet.
func (s *Server) waitIdle(stop <-chan struct{}) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.Active() > 0 {
		select {
		case <-stop:
			return s.Active() == 0
		case <-t.C:
		}
	}
	return true
}

// release stops the loops (or closes the pollers and sockets of loops
// never started) and writes the refusal counts still pending.
func (s *Server) release() {
	for _, l := range s.loops {
		if s.served {
			l.Stop()
			l.Wait()
		} else {
			l.Discard()
		}
	}
	for _, stop := range s.stopLogs {
		stop()
	}
	s.stopLogs = nil
}

// UDPFronts lists the UDP listeners with their live counters, in
// configuration order (for metrics).
func (s *Server) UDPFronts() []*loop.UDPFront { return s.udpFronts }
