package relay

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Conns counts the client connections the relay holds, for the loop's
// metrics: up with a relayed client, back to 0 once it closed.
func TestConnsCountsHeldConnections(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	l := h.loops[0]
	p := h.open("p", k)
	p.ping(t)
	if !testnet.WaitUntil(20*time.Second, func() bool { return l.Conns() == 1 }) {
		t.Fatalf("the relay counts %d connections, want 1", l.Conns())
	}
	p.close()
	if !testnet.WaitUntil(20*time.Second, func() bool { return l.Conns() == 0 }) {
		t.Fatalf("the relay counts %d connections after the close, want 0", l.Conns())
	}
}
