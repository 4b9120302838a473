package relay

import (
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A backend that accepts and resets before the loop has looked at its
// connect: the handshake completed, so the connect is no failed dial (with
// count_early_reset off), and the client must see the reset. The loop is
// driven by hand so the reset is surely there when it looks.
func TestBackendResetBeforeTheConnectIsSeenIsNoFailedDial(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	l := h.loops[0]
	dialed, resetDone, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	proceed := make(chan struct{})
	l.r.Post(func() {
		<-proceed // the client is in the listener's queue now
		for _, s := range l.lsocks {
			s.acceptAll() // accept and connect(2), in this turn
		}
		close(dialed)
		<-resetDone // the backend accepted and reset meanwhile
		close(finished)
	})
	c := h.dial("p")
	defer c.Close()
	close(proceed)
	<-dialed
	b := k.Next(t)
	b.SetLinger(0)
	b.Close() // on loopback the RST has landed when Close returns
	close(resetDone)
	<-finished
	mustReset(t, "client", c)
	testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
	be := h.front("p").Pool().Backends()[0]
	if ok, failed := be.Dials(pool.DialClient); ok != 1 || failed != 0 {
		t.Fatalf("client dials %d ok / %d failed, want 1 / 0: an accepted connect was blamed", ok, failed)
	}
}
