package splice

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Config tunes a Relayer.
type Config struct {
	// IdleTimeout closes a connection on which no byte moved in either
	// direction for this long. Zero disables it.
	IdleTimeout time.Duration
	// Pipes supplies splice pipes. Nil relays every connection by copy.
	Pipes *PipePool
}

// Relayer relays connections; one is shared by every connection of a pool.
// It is safe for concurrent use.
type Relayer struct {
	idleTimeout time.Duration
	pipes       *PipePool
	epoch       time.Time

	spliced atomic.Int64
	copied  atomic.Int64
}

// NewRelayer returns a Relayer with the given configuration.
func NewRelayer(cfg Config) *Relayer {
	return &Relayer{idleTimeout: cfg.IdleTimeout, pipes: cfg.Pipes, epoch: time.Now()}
}

// PathBytes reports how many bytes all relays moved by splice and by copy.
func (r *Relayer) PathBytes() (spliced, copied int64) {
	return r.spliced.Load(), r.copied.Load()
}

// sinceEpoch is a monotonic timestamp cheap enough to take once per chunk.
func (r *Relayer) sinceEpoch() int64 { return int64(time.Since(r.epoch)) }

// Meter receives live byte counts per direction. One Meter is typically
// shared by every connection to a backend.
type Meter struct {
	ToBackend atomic.Int64
	ToClient  atomic.Int64
}

// Outcome says how a relayed connection ended.
type Outcome int32

const (
	// Completed: both sides closed their write halves cleanly.
	Completed Outcome = iota + 1
	// IdleTimeout: nothing moved for the idle timeout.
	IdleTimeout
	// ClientReset: the client reset (or broke) the connection; the backend
	// was reset in turn.
	ClientReset
	// BackendReset: the backend reset (or broke) the connection; the client
	// was reset in turn.
	BackendReset
	// Aborted: a connection was closed from outside the relay, e.g. when a
	// shutdown ran out of time.
	Aborted
)

var outcomeNames = [...]string{"", "completed", "idle-timeout", "client-reset", "backend-reset", "aborted"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Result describes a finished relay.
type Result struct {
	ToBackend int64
	ToClient  int64
	Outcome   Outcome
	// Err is the socket error behind a reset outcome, nil otherwise.
	Err error
}

// Relay moves bytes between client and backend until both directions have
// ended, then closes both connections. It returns when the relay is over.
// m may be nil.
func (r *Relayer) Relay(client, backend net.Conn, m *Meter) Result {
	return r.Start(client, backend, m, nil).Wait()
}

// Session is a relay that has been started: its backend-to-client direction
// runs on a goroutine of its own, the other one runs in Wait.
type Session struct{ s *session }

// Start sets up the relay and starts its backend-to-client direction.
// firstByte, if not nil, is called once when the backend's first byte has
// been delivered to the client (if ever); it runs on the backend-to-client
// goroutine, outside any socket callback, so it may wait briefly (on a
// breaker Store) but holds that direction while it does. The caller must call Wait, typically on a fresh
// goroutine: a direction waiting for data parks with whatever stack its
// goroutine grew, so a shallow goroutine keeps an idle relay small.
func (r *Relayer) Start(client, backend net.Conn, m *Meter, firstByte func()) Session {
	s := &session{r: r, client: client, backend: backend}
	s.touch()
	var toBackend, toClient *atomic.Int64
	if m != nil {
		toBackend, toClient = &m.ToBackend, &m.ToClient
	}
	if !s.setupSplice(toBackend, toClient) {
		s.setupCopy(toBackend, toClient)
	}
	s.dirs[1].firstByte = firstByte
	if r.idleTimeout > 0 {
		s.mu.Lock()
		s.timer = time.AfterFunc(r.idleTimeout, s.checkIdle)
		s.mu.Unlock()
	}
	s.wg.Add(1)
	go s.runBackendToClient()
	return Session{s}
}

func (s *session) runBackendToClient() {
	defer s.wg.Done()
	s.dirs[1].run()
}

// Cut ends the relay at once, resetting both sides: for a shutdown that
// ran out of time. Closing one socket is not enough: a direction blocked
// writing to a backend that does not read would never notice.
func (rs Session) Cut() { rs.s.abort(Aborted, nil, true, true) }

// Wait runs the client-to-backend direction until it ends, waits for the
// other one, closes both connections and returns the result.
func (rs Session) Wait() Result {
	s := rs.s
	s.dirs[0].run()
	s.wg.Wait()
	return s.finish()
}

// session is the state of one relayed connection.
type session struct {
	r               *Relayer
	client, backend net.Conn
	lastActive      atomic.Int64
	ended           atomic.Int32 // directions that reached EOF
	inFlight        atomic.Int32 // directions holding read bytes not yet delivered
	wg              sync.WaitGroup
	dirs            [2]direction // 0: client to backend, 1: backend to client

	mu       sync.Mutex // guards the fields below
	timer    *time.Timer
	outq     [2]int // send-queue bytes of client, backend at the last idle check
	finished bool
	outcome  Outcome
	err      error
}

// setupSplice prepares both directions for splicing; false when either end
// is not a TCP socket (or there is no pipe pool), so copying must be used.
func (s *session) setupSplice(toBackend, toClient *atomic.Int64) bool {
	if s.r.pipes == nil {
		return false
	}
	c, ok1 := s.client.(*net.TCPConn)
	b, ok2 := s.backend.(*net.TCPConn)
	if !ok1 || !ok2 {
		return false
	}
	craw, err1 := c.SyscallConn()
	braw, err2 := b.SyscallConn()
	if err1 != nil || err2 != nil {
		return false
	}
	s.dirs[0].initRaw(s, craw, braw, b, toBackend, true)
	s.dirs[1].initRaw(s, braw, craw, c, toClient, false)
	return true
}

func (s *session) setupCopy(toBackend, toClient *atomic.Int64) {
	s.dirs[0].initCopy(s, s.client, s.backend, toBackend, true)
	s.dirs[1].initCopy(s, s.backend, s.client, toClient, false)
}

func (s *session) touch() { s.lastActive.Store(s.r.sinceEpoch()) }

// checkIdle runs when the idle timer fires. Traffic does not touch the
// timer; instead the timer, when it fires, re-arms itself for whatever is
// left since the last activity.
func (s *session) checkIdle() {
	left := s.r.idleTimeout - time.Duration(s.r.sinceEpoch()-s.lastActive.Load())
	// Sampled on every run, so "draining" means the queue changed since
	// the previous run, not merely that it holds bytes.
	draining := s.peersDraining()
	if left <= 0 && draining {
		// Bytes l4lb handed over long ago are still being read out of a
		// socket's send queue by a slow peer: that is traffic too.
		s.touch()
		left = s.r.idleTimeout
	}
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return
	}
	if left > 0 {
		s.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.abort(IdleTimeout, nil, false, false)
}

// peersDraining reports whether either socket's unsent queue changed since
// the last idle check and is not empty: its peer is reading, slowly. Only
// called when the idle timer fires, so it costs nothing per byte.
func (s *session) peersDraining() bool {
	draining := false
	for i, c := range [2]net.Conn{s.client, s.backend} {
		q := sendQueue(c)
		s.mu.Lock()
		if q > 0 && q != s.outq[i] {
			draining = true
		}
		s.outq[i] = q
		s.mu.Unlock()
	}
	return draining
}

// sendQueue is the number of bytes in c's send queue not yet acknowledged
// by the peer (TIOCOUTQ); 0 when it cannot be read.
func sendQueue(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	q := 0
	raw.Control(func(fd uintptr) {
		q, _ = unix.IoctlGetInt(int(fd), unix.TIOCOUTQ)
	})
	return q
}

// abort ends the relay early. The first reason recorded wins. Resetting a
// side (SO_LINGER 0) makes its close send RST instead of FIN, which is how a
// reset on one side is passed on to the other. A relay cut from outside,
// or with bytes read but not yet delivered, resets both sides, so neither
// mistakes a truncated stream for a complete one.
func (s *session) abort(o Outcome, err error, resetClient, resetBackend bool) {
	s.mu.Lock()
	first := s.outcome == 0
	if first {
		s.outcome, s.err = o, err
	}
	s.mu.Unlock()
	if !first {
		return
	}
	if o == Aborted || s.inFlight.Load() > 0 {
		resetClient, resetBackend = true, true
	}
	if resetClient {
		setLingerZero(s.client)
	}
	if resetBackend {
		setLingerZero(s.backend)
	}
	s.client.Close()
	s.backend.Close()
}

// brokenEnd aborts after a socket error on one end: that end is gone, the
// other is reset so its peer learns the connection broke, not that it ended.
func (s *session) brokenEnd(clientSide bool, err error) {
	if clientSide {
		s.abort(ClientReset, err, false, true)
	} else {
		s.abort(BackendReset, err, true, false)
	}
}

func (s *session) finish() Result {
	s.mu.Lock()
	s.finished = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.outcome == 0 {
		s.outcome = Completed
	}
	res := Result{ToBackend: s.dirs[0].n, ToClient: s.dirs[1].n, Outcome: s.outcome, Err: s.err}
	s.mu.Unlock()
	s.client.Close()
	s.backend.Close()
	return res
}

func setLingerZero(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

// closeWrite half-closes c, or reports false when c cannot half-close.
func closeWrite(c net.Conn) bool {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return true
	}
	return false
}

// rawConn is the subset of syscall.RawConn a direction needs.
type rawConn = syscall.RawConn
