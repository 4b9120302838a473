package e2e

import (
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A second signal cuts the drain short; the log says so, with the number
// of connections it cut, rather than blaming a shutdown timeout that never
// ran out.
func TestSecondSignalSaysItCutConnections(t *testing.T) {
	testnet.CheckLeaks(t)
	p, _, c, _ := servingOneClient(t, "[global]\nshutdown_timeout = \"5m\"")
	p.signal(t, syscall.SIGTERM)
	testnet.Eventually(t, "the drain to begin", func() bool {
		return strings.Contains(p.stderr.String(), "shutting down")
	})
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("held connection: %v, want it cut with a reset", err)
	}
	log := p.stderr.String()
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "second signal") {
			line = l
		}
	}
	for _, want := range []string{"level=WARN", "cut the open connections at once", "signal=interrupt", "connections=1"} {
		if !strings.Contains(line, want) {
			t.Errorf("second-signal log line %q lacks %q", line, want)
		}
	}
	if strings.Contains(log, "context canceled") {
		t.Errorf("the log blames a canceled context instead of saying what happened:\n%s", log)
	}
}
