package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/splice"
)

// Frontend is one listener and the pool it feeds.
type Frontend struct {
	Name    string
	Bind    string
	Backlog int
	Pool    *pool.Pool
}

// Config describes a Server.
type Config struct {
	Frontends []Frontend
	// AcceptLoops per listener; 0: one per CPU.
	AcceptLoops int
	// MaxConnections caps client connections open at once; past it new
	// clients are accepted and closed at once. Must be > 0.
	MaxConnections int
	Logger         *slog.Logger
}

// Server runs the listeners of one configuration.
type Server struct {
	fronts   []*front
	max      int64
	log      *slog.Logger
	active   atomic.Int64
	handlers sync.WaitGroup
	conns    tracker
	own      ownDials
	capLog   *refusalLog

	// dialCtx is canceled only when a shutdown runs out of time, so dials
	// in flight while draining still complete.
	dialCtx    context.Context
	cancelDial context.CancelFunc
}

type front struct {
	name     string
	ln       *listener.Listener
	pool     *pool.Pool
	ok       atomic.Int64
	failed   atomic.Int64
	rejected atomic.Int64
	loops    atomic.Int64
	// Clients refused for want of a backend, and connection loops, are
	// logged at most once a second each, with a count.
	noBackendLog *refusalLog
	loopLog      *refusalLog
}

// New binds every listener (so a busy address fails here) without
// accepting yet. A Server that is never served must still be shut down to
// release its addresses.
func New(cfg Config) (*Server, error) {
	if cfg.MaxConnections <= 0 {
		return nil, errors.New("proxy: MaxConnections must be > 0")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{max: int64(cfg.MaxConnections), log: log}
	s.conns.init()
	s.own.init()
	s.capLog = newRefusalLog(time.Second, func(n int64) {
		log.Warn("clients refused: connection cap reached", "max_connections", s.max, "refused", n)
	})
	s.dialCtx, s.cancelDial = context.WithCancel(context.Background())
	for _, fc := range cfg.Frontends {
		ln, err := listener.Listen(listener.Config{
			Name: fc.Name, Addr: fc.Bind, Backlog: fc.Backlog, Loops: cfg.AcceptLoops, Logger: log,
		})
		if err != nil {
			s.closeListeners()
			return nil, err
		}
		f := &front{name: fc.Name, ln: ln, pool: fc.Pool}
		f.noBackendLog = newRefusalLog(time.Second, func(n int64) {
			log.Warn("clients refused: no backend could be reached", "listener", f.name, "pool", f.pool.Name, "refused", n)
		})
		f.loopLog = newRefusalLog(time.Second, func(n int64) {
			log.Error("connection loop: a backend of the pool leads back to l4lb itself; clients reset",
				"listener", f.name, "pool", f.pool.Name, "refused", n)
		})
		s.fronts = append(s.fronts, f)
	}
	return s, nil
}

// Serve starts accepting on every listener and returns at once.
func (s *Server) Serve() {
	for _, f := range s.fronts {
		f.ln.Serve(s.acceptor(f))
	}
}

// Addr returns the bound address of the named listener.
func (s *Server) Addr(name string) (*net.TCPAddr, error) {
	for _, f := range s.fronts {
		if f.name == name {
			return f.ln.Addr(), nil
		}
	}
	return nil, fmt.Errorf("proxy: no listener %q", name)
}

// Active is the number of client connections being served now.
func (s *Server) Active() int64 { return s.active.Load() }

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
		out[i] = ListenerStats{Name: f.name, OK: f.ok.Load(), Failed: f.failed.Load(),
			Rejected: f.rejected.Load(), AcceptErrors: f.ln.AcceptErrors(), Loops: f.loops.Load()}
	}
	return out
}

// PathBytes sums, over every pool, the bytes moved by splice and by copy.
func (s *Server) PathBytes() (spliced, copied int64) {
	seen := map[*pool.Pool]bool{}
	for _, f := range s.fronts {
		if seen[f.pool] {
			continue
		}
		seen[f.pool] = true
		sp, cp := f.pool.Relayer().PathBytes()
		spliced += sp
		copied += cp
	}
	return spliced, copied
}

func (s *Server) acceptor(f *front) listener.Handler {
	return func(c *net.TCPConn) {
		if s.active.Add(1) > s.max {
			s.active.Add(-1)
			f.rejected.Add(1)
			c.Close()
			s.capLog.note()
			return
		}
		s.handlers.Add(1)
		go s.serve(f, c)
	}
}

// serve connects the client to a backend and starts the relay, then hands
// its client-to-backend direction to a fresh goroutine and returns: dialing
// grows a goroutine's stack to several KiB, and an idle relay should not
// keep that stack for its whole life.
func (s *Server) serve(f *front, c *net.TCPConn) {
	s.conns.add(c)
	src := unmapped(c.RemoteAddr())
	// As l4lb's own dial would see this connection, were it one.
	asDial := conn4{local: src, remote: unmapped(c.LocalAddr())}
	if s.own.has(asDial) {
		s.refuseLoop(f, c)
		return
	}
	up, err := f.pool.Connect(s.dialCtx, src, func() bool { return peerGone(c) })
	if err != nil {
		if errors.Is(err, pool.ErrLocal) {
			f.rejected.Add(1)
		} else {
			f.failed.Add(1)
			f.noBackendLog.note()
		}
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("client not served", "listener", f.name, "client", src.String(), "error", err)
		}
		s.done(c)
		return
	}
	local := conn4{local: unmapped(up.Conn.LocalAddr()), remote: unmapped(up.Conn.RemoteAddr())}
	s.own.add(local)
	// Checked again now that this dial is known: the looping connection
	// may have been accepted before the dial that made it was recorded.
	if s.own.has(asDial) {
		s.own.remove(local)
		up.Release()
		s.refuseLoop(f, c)
		return
	}
	f.ok.Add(1)
	r := f.pool.StartRelay(c, up)
	s.conns.relaying(c, r)
	go s.finishRelay(f, c, up, r, local)
}

// refuseLoop resets a client that is l4lb's own backend connection, which
// ends the loop at this hop.
func (s *Server) refuseLoop(f *front, c *net.TCPConn) {
	f.rejected.Add(1)
	f.loops.Add(1)
	f.loopLog.note()
	c.SetLinger(0)
	s.done(c)
}

// unmapped is a connection address as a comparable netip.AddrPort, IPv4
// in its 4-byte form whichever way the kernel reported it.
func unmapped(a net.Addr) netip.AddrPort {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func (s *Server) finishRelay(f *front, c *net.TCPConn, up pool.Upstream, r *pool.Relaying, local conn4) {
	res := r.Wait()
	s.own.remove(local)
	s.done(c)
	if res.Outcome == splice.ClientReset || res.Outcome == splice.BackendReset {
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("relay reset", "listener", f.name, "client", c.RemoteAddr().String(),
				"backend", up.Backend.Addr, "outcome", res.Outcome.String(), "error", res.Err)
		}
	}
}

// done ends the accounting of a client connection.
func (s *Server) done(c *net.TCPConn) {
	c.Close()
	s.conns.remove(c)
	s.active.Add(-1)
	s.handlers.Done()
}

// Shutdown stops accepting, waits for open relays to finish until ctx is
// done, then closes what is left and waits for it to wind down.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeListeners()
	drained := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		s.cancelDial()
		s.stopLogs()
		return nil
	case <-ctx.Done():
		if s.active.Load() == 0 { // nothing left to cut: drained, or about to be
			<-drained
			s.cancelDial()
			s.stopLogs()
			return nil
		}
	}
	left := s.active.Load()
	s.cancelDial()
	s.conns.cutAll()
	<-drained
	s.stopLogs()
	return fmt.Errorf("proxy: reset %d connections still open when the drain ended: %w", left, context.Cause(ctx))
}

// stopLogs writes the refusal counts still pending.
func (s *Server) stopLogs() {
	s.capLog.stop()
	for _, f := range s.fronts {
		f.noBackendLog.stop()
		f.loopLog.stop()
	}
}

func (s *Server) closeListeners() {
	for _, f := range s.fronts {
		f.ln.Close()
	}
}
