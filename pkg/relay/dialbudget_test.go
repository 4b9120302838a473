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

// A client back from the slot queue that finds every backend full again
// (another loop took the slot the pass saw free) queues again with what
// it had spent of its budget and its force-try, not a fresh budget.
func TestRequeuedClientKeepsWhatItSpentOfItsBudget(t *testing.T) {
	q := newQueuedBehind(t)
	want := spentBudget{left: int64(2 * time.Second), budgeted: true, forced: true}
	var got *spentBudget
	q.h.on(q.l, func() {
		// As the retry pass takes a client off the queue, the backend
		// still full.
		c := q.c
		c.spent = &want
		c.waiting = false
		q.l.r.Disarm(&c.timer)
		c.phase = phaseDialing
		c.startDial()
		got = c.spent
		if c.phase != phaseQueued || !c.waiting {
			t.Errorf("phase %d, waiting %v after a full pool: want it queued again", c.phase, c.waiting)
		}
	})
	if got == nil || got.budgeted != want.budgeted || got.forced != want.forced || got.left > want.left || got.left < want.left-int64(time.Second) {
		t.Fatalf("spent after queueing again: %+v, want about %+v", got, want)
	}
	q.served(t)
}
