package relay

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/accesslog"
)

// A listener with access_log = false writes no line of any event
// (connect, interim, close) while another of the same loops writes all
// three, and its clients are counted as before.
func TestListenerOutOfTheAccessLogWritesNoLine(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "quiet", backends: []string{k.Addr}}, {name: "loud", backends: []string{k.Addr}}}})
	q := accesslog.NewQueue(len(h.loops), 1024)
	q.SetEvents(20*time.Millisecond, true)
	h.sh.SetAccessLog(q)
	t.Cleanup(func() { h.sh.SetAccessLog(nil) })
	h.front("quiet").SetAccessLog(false)

	quiet := h.open("quiet", k) // first: its interim records would be due first
	quiet.ping(t)
	loud := h.open("loud", k)
	loud.ping(t)
	events := map[string]map[accesslog.Event]int{"quiet": {}, "loud": {}}
	drain := func() { q.Drain(func(r *accesslog.Record) { events[r.Listener][r.Event]++ }) }
	testnet.Eventually(t, "an interim line of the loud listener", func() bool {
		drain()
		return events["loud"][accesslog.EventInterim] > 0
	})
	quiet.close()
	loud.close()
	testnet.Eventually(t, "the close line of the loud listener", func() bool {
		drain()
		return events["loud"][accesslog.EventClose] == 1
	})
	if n := events["loud"][accesslog.EventConnect]; n != 1 {
		t.Errorf("the loud listener wrote %d connect lines, want 1", n)
	}
	if len(events["quiet"]) != 0 {
		t.Errorf("the listener with access_log = false wrote lines: %v", events["quiet"])
	}
	testnet.Eventually(t, "the quiet listener's client counted completed", func() bool {
		return h.front("quiet").Closed[CloseCompleted].Load() == 1
	})
}
