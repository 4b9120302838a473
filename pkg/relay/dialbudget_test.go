package relay

import (
	"io"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// connect_budget may equal connect_timeout (config allows it: the first
// dial still gets its full time). A first dial that times out is then the
// backend's failure, breaker evidence, not a dial the budget cut short.
func TestFirstDialTimeoutWithBudgetEqualToTimeoutIsAFailure(t *testing.T) {
	frozen := testnet.FrozenBackend(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{frozen},
		keys: "connect_timeout = \"1s\"\nconnect_budget = \"1s\""}}})
	c := h.dial("p")
	defer c.Close()
	if n, err := readToEnd(c, 30*time.Second); err != io.EOF || n != 0 {
		t.Fatalf("client: %d bytes then %v, want EOF (not served)", n, err)
	}
	testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
	if ok, failed := h.front("p").Pool().At(0).Dials(pool.DialClient); ok != 0 || failed != 1 {
		t.Fatalf("frozen backend: %d dials ok, %d failed; want its timeout counted as one failure", ok, failed)
	}
}
