package listener

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one listening address.
type Config struct {
	// Name identifies the listener in logs.
	Name string
	// Addr is host:port with an IP literal; port 0 picks a free port,
	// shared by all the sockets.
	Addr string
	// Backlog is the accept queue length; 0 means the kernel's somaxconn.
	Backlog int
	// Loops is how many SO_REUSEPORT sockets, each with an accept loop,
	// serve the address; 0 means one per CPU.
	Loops int
	// Logger receives start, stop and accept-trouble events; nil discards.
	Logger *slog.Logger
}

// Handler takes ownership of an accepted connection. It is called on the
// accept loop's goroutine, so it must not block: start a goroutine.
type Handler func(c *net.TCPConn)

// Listener is a set of sockets sharing one address.
type Listener struct {
	cfg     Config
	log     *slog.Logger
	sockets []*net.TCPListener
	addr    *net.TCPAddr

	closing      chan struct{}
	closeOnce    sync.Once
	loops        sync.WaitGroup
	acceptErrors atomic.Int64
}

// Listen opens every socket of cfg now, so that a bad or busy address fails
// at start-up rather than in a loop.
func Listen(cfg Config) (*Listener, error) {
	ap, err := netip.ParseAddrPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listener %q: bad address %q: %w", cfg.Name, cfg.Addr, err)
	}
	if cfg.Loops <= 0 {
		cfg.Loops = runtime.NumCPU()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{cfg: cfg, log: log.With("listener", cfg.Name), closing: make(chan struct{})}
	if ap.Port() != 0 {
		if err := checkUnused(ap); err != nil {
			return nil, fmt.Errorf("listener %q on %s: %w", cfg.Name, cfg.Addr, err)
		}
	}
	for i := 0; i < cfg.Loops; i++ {
		s, err := listenSocket(ap, cfg.Backlog)
		if err != nil {
			l.closeSockets()
			return nil, fmt.Errorf("listener %q on %s: %w", cfg.Name, cfg.Addr, err)
		}
		if i == 0 {
			// With port 0 the kernel chose a port: the other sockets
			// must join that one.
			l.addr = s.Addr().(*net.TCPAddr)
			ap = l.addr.AddrPort()
		}
		l.sockets = append(l.sockets, s)
	}
	return l, nil
}

// Addr is the bound address (with the chosen port when 0 was asked).
func (l *Listener) Addr() *net.TCPAddr { return l.addr }

// AcceptErrors counts accept calls that failed for reasons other than the
// listener closing.
func (l *Listener) AcceptErrors() int64 { return l.acceptErrors.Load() }

// Serve starts one accept loop per socket and returns at once.
func (l *Listener) Serve(h Handler) {
	l.log.Info("listener started", "addr", l.addr.String(), "sockets", len(l.sockets))
	for _, s := range l.sockets {
		l.loops.Add(1)
		go l.acceptLoop(s, h)
	}
}

// Close stops accepting and waits for the accept loops to end. Connections
// already handed to the Handler are not touched.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closing)
		l.closeSockets()
		l.loops.Wait()
		l.log.Info("listener stopped", "addr", l.addr.String())
	})
	return nil
}

func (l *Listener) closeSockets() {
	for _, s := range l.sockets {
		s.Close()
	}
}

const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

func (l *Listener) acceptLoop(s *net.TCPListener, h Handler) {
	defer l.loops.Done()
	var backoff time.Duration
	var failures int
	for {
		c, err := s.AcceptTCP()
		if err == nil {
			if failures > 0 {
				l.log.Info("accepting again", "failed_accepts", failures)
				failures, backoff = 0, 0
			}
			h(c)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		l.acceptErrors.Add(1)
		failures++
		if backoff == 0 {
			backoff = minBackoff
			// One line per episode, not per failed accept.
			l.log.Warn("accept failing, backing off", "error", err)
		} else {
			backoff = min(2*backoff, maxBackoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-l.closing:
			t.Stop()
			return
		case <-t.C:
		}
	}
}
