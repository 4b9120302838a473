package admin

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// logBuffer collects a logger's lines for a test to read.
type logBuffer struct{ testnet.LogBuffer }

// lines returns the logged lines that contain every one of want.
func (l *logBuffer) lines(want ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func newLog() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// testPool is the "web" pool of testConfig.
func testPool(t *testing.T) *pool.Pool {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(cfg.Pools["web"], pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testTimeouts outlast any test, so no connection is closed for idling
// while a test counts connections.
var testTimeouts = timeouts{readHeader: time.Minute, read: time.Minute, write: time.Minute, idle: time.Minute}

// startAdmin starts the endpoint on c (max_connections 64 unless set) in
// front of the test pool, closed when the test ends.
func startAdmin(t *testing.T, c config.Admin, to timeouts) (*Server, *pool.Pool, *logBuffer) {
	t.Helper()
	testnet.CheckLeaks(t)
	if c.MaxConnections == 0 {
		c.MaxConnections = 64
	}
	p := testPool(t)
	log, buf := newLog()
	s, err := start(c, Sources{Pools: []*pool.Pool{p}, MaxConnections: 100}, log, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p, buf
}
