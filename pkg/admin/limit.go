package admin

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener caps the admin connections open at once. The endpoint
// shares the process's file descriptors with the data path, so without a
// cap idle scrapers or a flood of API clients could take the fds relayed
// clients need.
//
// Past the cap it accepts and closes at once (with a reset) rather than
// leaving connections unaccepted: an unaccepted connection still completes
// its handshake in the kernel and waits in the listen backlog, so clients
// would hang instead of failing, the backlog would fill and then drop
// SYNs, and once a slot freed the server would first serve connections
// whose clients gave up long ago. Closing costs one fd for an instant,
// which the fd budget reserves (pkg/server, DeriveBudget).
type limitListener struct {
	net.Listener
	max      int64
	log      *slog.Logger
	open     atomic.Int64
	rejected atomic.Int64

	mu       sync.Mutex
	lastWarn time.Time
}

// warnEvery bounds the rejection log: a flood must not flood the log too.
const warnEvery = 10 * time.Second

func newLimitListener(ln net.Listener, limit int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: int64(limit), log: log}
}

// Accept returns the next connection within the cap, closing those past it.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.reject(c)
	}
}

func (l *limitListener) reject(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) // a reset: the client learns at once, and no TIME_WAIT stays here
	}
	// Counted before the close: a client that sees its reset must find
	// itself in l4lb_admin_connections_rejected_total already.
	n := l.rejected.Add(1)
	c.Close()
	l.mu.Lock()
	warn := time.Since(l.lastWarn) >= warnEvery
	if warn {
		l.lastWarn = time.Now()
	}
	l.mu.Unlock()
	if warn {
		l.log.Warn("admin connection refused: too many open; raise [admin] max_connections if scrapers or API clients need more",
			"max_connections", l.max, "rejected_total", n, "remote", c.RemoteAddr().String())
	}
}

// limitConn gives its slot back on its first Close (http.Server may close
// a connection more than once).
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
