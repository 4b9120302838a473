package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/sockopt"
	"github.com/l4lb/l4lb/pkg/splice"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// Frontend is one listener and the pool it feeds.
type Frontend struct {
	Name     string
	Bind     string
	Protocol string // "tcp" (or "") | "udp"
	Backlog  int    // tcp only
	Pool     *pool.Pool

	// Policy is what the listener checks of a client before any dial
	// (PROXY header, allow/deny, per-source limits); nil: nothing. UDP
	// listeners use its allow and deny lists.
	Policy *relay.Policy
	// Routing is a TCP listener's SNI routes (Routings); nil: none.
	Routing *relay.Routing
	// Keepalive is TCP keepalive on the client side, set on the listening
	// sockets so accepted connections inherit it.
	Keepalive sockopt.Keepalive
	// NoAccessLog keeps the listener out of the access log (its
	// access_log = false), TCP or UDP; a reload may flip it.
	NoAccessLog bool

	// UDP listeners only; see udpsession.Front.
	SessionTimeout      time.Duration
	MaxSessions         int
	Responses, Requests int
	ReuseSockets        bool
	ReceiveBuffer       int // SO_RCVBUF of each socket, bytes; 0: left as it is

	// FDs are inherited sockets of this protocol bound to Bind (from the
	// process this one replaces, or from systemd) to serve instead of
	// binding new ones; see handoff.go. The server takes each over by
	// setting its slot to -1; on an error the caller closes those left.
	FDs []int
}

// Config describes a Server.
type Config struct {
	Frontends []Frontend
	// Loops is the number of event loops, each with its own socket per
	// listener (SO_REUSEPORT); 0: GOMAXPROCS (the CPUs the process may
	// use).
	Loops int
	// MaxConnections caps client connections open at once; past it new
	// clients are accepted and closed at once. Must be > 0.
	MaxConnections int
	// MaxConnectionsDerived: MaxConnections came from the fd limit
	// (max_connections = 0); see ConnCap.
	MaxConnectionsDerived bool
	// Pipes supplies splice pipes; nil relays by copy only.
	Pipes *splice.PipePool
	// IsLocal reports whether an address belongs to this host (loop
	// detection); nil: loopback only.
	IsLocal func(netip.Addr) bool
	// BusyPoll is how long a busy loop polls before it sleeps (0: never).
	BusyPoll time.Duration
	// WakeCoalesce is how long a loop that relayed data on several
	// connections sleeps on a timer before it polls again (0: never).
	WakeCoalesce time.Duration
	// Own are sockets this process holds and closes once the server
	// serves: an upgrade's inherited sockets no listener took. A listener
	// bound beside one of them on an overlapping address (moved from
	// "127.0.0.1:P" to "0.0.0.0:P") is not refused as if another process
	// held the port.
	Own    listener.Own
	Logger *slog.Logger
}

// Server runs the listeners of one configuration on its event loops.
type Server struct {
	sh    *relay.Shared
	loops []*cpuLoop
	log   *slog.Logger
	// mu guards the listener lists, which a reload replaces while
	// metrics and the admin API read them.
	mu        sync.RWMutex
	fronts    []*front
	udpFronts []*udpFront
	served    bool
	closed    bool
	// stopLogs flush the server's rate-limited refusal logs at the end;
	// the listeners' are flushed through the lists above, so a listener a
	// reload removed is not kept alive by them.
	stopLogs []func()
	reloadMu sync.Mutex // one reload at a time

	// A binary upgrade's hand-over (flows.go): the loop the next adopted
	// TCP record goes to, and the queued clients held until it is done,
	// by loop.
	adoptNext atomic.Uint64
	heldMu    sync.Mutex
	held      [][]adopted
	// What the old process of an upgrade holds, as the cap counts it
	// (oldprocess.go).
	old oldProcess
}

type front struct {
	*relay.Front
	key  string // protocol and bind address: what a reload matches on
	addr *net.TCPAddr
	// own are its sockets: when a reload removes it, a new listener may
	// bind beside them on an overlapping address.
	own listener.Own
	// Clients refused for want of a backend, and connection loops, are
	// logged at most once a second each, with a count.
	noBackendLog *refusalLog
	loopLog      *refusalLog
	localLog     *refusalLog
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
		n = runtime.GOMAXPROCS(0)
	}
	s := &Server{sh: relay.NewShared(int64(cfg.MaxConnections), cfg.Pipes, log), log: log}
	s.sh.Guard.IsLocal = cfg.IsLocal
	s.setCap(ConnCap{MaxConnections: cfg.MaxConnections, Derived: cfg.MaxConnectionsDerived})
	capLog := newRefusalLog(time.Second, func(_ string, k int64) { // the cap is the process's: no pool
		maxConns, old := s.capNow()
		args := []any{"max_connections", maxConns, "refused", k} // as a reload left it
		// An upgrade's old process: what it holds counts too.
		if old > 0 {
			args = append(args, "held_by_the_old_process", old)
		}
		log.Warn("clients refused: connection cap reached", args...)
	})
	s.sh.OnCap = func() { capLog.note("") }
	s.stopLogs = append(s.stopLogs, capLog.stop)
	for i := range n {
		l, err := newLoop(i, s.sh, cfg, log)
		if err != nil {
			s.release()
			return nil, err
		}
		s.loops = append(s.loops, l)
	}
	for _, fc := range cfg.Frontends {
		b, err := s.open(fc, cfg.Own)
		if err == nil {
			err = s.attach(b, false)
		}
		if err != nil {
			s.release()
			return nil, err
		}
		s.add(b)
	}
	return s, nil
}

// bound is a listener whose sockets are open but not yet in the loops.
type bound struct {
	tcp     *front
	udp     *udpFront
	tcpSock *listener.Sockets
	udpSock *listener.UDPSockets
}

func (b *bound) close() {
	if b.tcpSock != nil {
		b.tcpSock.Close()
	}
	if b.udpSock != nil {
		b.udpSock.Close()
	}
}

// open binds fc's sockets, one per loop, without handing them over: a
// busy address fails here, before anything changed. Sockets in own (this
// process's, about to close) do not make an address busy.
func (s *Server) open(fc Frontend, own listener.Own) (*bound, error) {
	if fc.Protocol == "udp" {
		return s.openUDP(fc, own)
	}
	socks, err := tcpSockets(fc, len(s.loops), own)
	if err != nil {
		return nil, err
	}
	for _, fd := range socks.FDs {
		if err := fc.Keepalive.Apply(fd); err != nil {
			socks.Close()
			return nil, fmt.Errorf("listener %s: keepalive: %w", fc.Name, err)
		}
	}
	f := &front{Front: relay.NewFront(fc.Name, fc.Pool), key: frontKey(fc), addr: socks.Addr, own: listener.Own{}}
	f.own.Add(socks.FDs)
	f.SetPolicy(fc.Policy)
	f.SetRouting(fc.Routing)
	f.SetAccessLog(!fc.NoAccessLog)
	f.noBackendLog = newRefusalLog(time.Second, func(pool string, k int64) {
		s.log.Warn("clients refused: no backend could be reached", "listener", f.Name, "pool", pool, "refused", k)
	})
	f.loopLog = newRefusalLog(time.Second, func(pool string, k int64) {
		s.log.Error("connection loop: a backend of the pool leads back to l4lb itself; clients reset",
			"listener", f.Name, "pool", pool, "refused", k)
	})
	f.localLog = newRefusalLog(time.Second, func(pool string, k int64) {
		s.log.Warn("clients refused: local trouble (out of local ports toward a backend, file descriptors or memory); no backend blamed",
			"listener", f.Name, "pool", pool, "refused", k, "see", "l4lb_pool_ports_exhausted_total")
	})
	f.OnNoBackend, f.OnLoop, f.OnLocalError = f.noBackendLog.note, f.loopLog.note, f.localLog.note
	return &bound{tcp: f, tcpSock: socks}, nil
}

// attach hands each loop its socket of b: directly before the loops
// start, through the loop (Do) when live.
func (s *Server) attach(b *bound, live bool) error {
	on := func(l *cpuLoop, f func()) error {
		if !live {
			f()
			return nil
		}
		if !l.Do(f) {
			return errors.New("proxy: the event loop has stopped")
		}
		return nil
	}
	if b.udp != nil {
		return s.attachUDP(b, on, live)
	}
	f, socks := b.tcp, b.tcpSock
	s.sh.Guard.ListenOn(uint16(socks.Addr.Port))
	err := s.spread(socks.FDs, true, func(l *cpuLoop, fd int) (err error) {
		if derr := on(l, func() { err = l.tcp.AddListener(fd, f.Front) }); derr != nil {
			return derr // never registered: closed with the rest below
		}
		return err
	})
	if err != nil {
		socks.Close()
		if live {
			// The loops that took a socket already accept on it: take it
			// back, or they would serve a listener the server does not know.
			for _, l := range s.loops {
				l.Do(func() { l.tcp.DetachListener(f.Front) })
			}
		}
	}
	return err
}

// add records an attached listener.
func (s *Server) add(b *bound) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.udp != nil {
		s.udpFronts = append(s.udpFronts, b.udp)
		return
	}
	s.fronts = append(s.fronts, b.tcp)
}

// frontKey is what a reload matches listeners on: protocol and address.
func frontKey(fc Frontend) string {
	proto := fc.Protocol
	if proto == "" {
		proto = "tcp"
	}
	bind := fc.Bind
	if ap, err := netip.ParseAddrPort(fc.Bind); err == nil {
		bind = ap.String()
	}
	return proto + " " + bind
}

// Serve starts the event loops and returns at once.
func (s *Server) Serve() {
	s.reloadMu.Lock() // a reload reads served and closed
	defer s.reloadMu.Unlock()
	if s.served || s.closed {
		return
	}
	s.served = true
	for _, l := range s.loops {
		l.Start()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.fronts {
		s.log.Info("listener started", "listener", f.Name, "protocol", "tcp", "addr", f.addr.String(), "loops", len(s.loops))
	}
	for _, f := range s.udpFronts {
		s.log.Info("listener started", "listener", f.Name, "protocol", "udp", "addr", f.addr.String(), "loops", len(s.loops))
	}
}

// Addr returns the bound address of the named listener.
func (s *Server) Addr(name string) (*net.TCPAddr, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.fronts {
		if f.Name == name {
			return f.addr, nil
		}
	}
	return nil, fmt.Errorf("proxy: no listener %q", name)
}

// Loops is the number of event loops.
func (s *Server) Loops() int { return len(s.loops) }

// MaxConnections is the cap on client connections now (a reload may
// change it).
func (s *Server) MaxConnections() int64 { return s.sh.Cap().Max }

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
	s.mu.RLock()
	defer s.mu.RUnlock()
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

// LoopStats returns each event loop's counts, in loop order.
func (s *Server) LoopStats() []LoopStats {
	out := make([]LoopStats, len(s.loops))
	for i, l := range s.loops {
		out[i] = LoopStats{Stats: l.Stats(), Conns: l.Conns()}
	}
	return out
}

// CutBackend resets the relays every loop holds to b (an operator's drain
// reached its deadline).
func (s *Server) CutBackend(b *pool.Backend) {
	for _, l := range s.loops {
		l.tcp.CutBackend(b)
		l.udp.CutBackend(b)
	}
}

// Shutdown stops accepting, waits for open connections to finish until
// ctx is done, then resets what is left and stops the loops.
func (s *Server) Shutdown(ctx context.Context) error {
	// Under reloadMu: a reload under way finishes first (its listeners are
	// then closed with the rest), and none starts after.
	s.reloadMu.Lock()
	closed := s.closed
	s.closed = true
	s.reloadMu.Unlock()
	if closed {
		return nil
	}
	if !s.served {
		s.release()
		return nil
	}
	for _, l := range s.loops {
		l.CloseListeners()
	}
	// Once every loop has closed its listeners, the clients they took from
	// their queues count as open: the drain waits for them too.
	for _, l := range s.loops {
		l.Do(func() {})
	}
	var err error
	if !s.waitIdle(ctx.Done()) {
		left := s.Active() // the caller logs why the drain ended (deadline or signal)
		for _, l := range s.loops {
			l.tcp.CutAll()
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
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.fronts {
		f.noBackendLog.stop()
		f.loopLog.stop()
		f.localLog.stop()
	}
	for _, f := range s.udpFronts {
		f.noBackendLog.stop()
	}
}

// UDPFronts lists the UDP listeners with their live counters, in
// configuration order (for metrics).
func (s *Server) UDPFronts() []*udpsession.Front {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*udpsession.Front, len(s.udpFronts))
	for i, f := range s.udpFronts {
		out[i] = f.Front
	}
	return out
}
