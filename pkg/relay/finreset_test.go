package relay

import (
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A peer that half-closes and then resets (its FIN and its RST both
// waiting when the loop next looks) has broken the stream: the other side
// must see a reset, not a clean end. After the FIN every read returns EOF,
// so the reset is only in the socket's pending error.
func TestFINThenResetReachesThePeerAsAReset(t *testing.T) {
	for _, backendResets := range []bool{true, false} {
		name := "client FIN then reset"
		if backendResets {
			name = "backend FIN then reset"
		}
		t.Run(name, func(t *testing.T) {
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
			p := h.open("p", k)
			defer p.close()
			p.ping(t)
			resetter, peer := p.client, p.backend
			if backendResets {
				resetter, peer = peer, resetter
			}
			release := h.hold(h.loops[0])
			resetter.CloseWrite()
			resetter.SetLinger(0)
			resetter.Close()
			release()
			mustReset(t, "the peer of the side that reset", peer)
			testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
		})
	}
}
