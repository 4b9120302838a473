package relay

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// On a loop: one connection's ping-pong never arms coalescing, so a lone
// request is never held back; data on two relays in one turn does.
func TestCoalescingArmsOnSeveralRelaysNotOnOne(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}, wakeCoalesce: time.Millisecond})
	l := h.loops[0]
	a, b := h.open("p", k), h.open("p", k)
	defer a.close()
	defer b.close()
	a.ping(t)
	b.ping(t)
	gathers := func() (n int) { h.on(l, func() { n = l.r.CoalescedWaits() }); return n }

	// One relay, one message at a time, each answered before the next.
	before := gathers()
	for range 50 {
		a.ping(t)
	}
	if n := gathers() - before; n != 0 {
		t.Fatalf("one connection's ping-pong made %d coalesced waits, want 0", n)
	}

	// Data on both relays while the loop is held: the next turn has two
	// data events, and the wait after it coalesces.
	testnet.Eventually(t, "a turn with two relays' data to arm a coalesced wait", func() bool {
		before := gathers()
		release := h.hold(l)
		a.client.Write([]byte("ping"))
		b.client.Write([]byte("ping"))
		time.Sleep(time.Millisecond) // both segments queued on the loop's sockets
		release()
		for _, p := range []*proxied{a, b} {
			p.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := p.backend.Read(make([]byte, 4)); err != nil {
				t.Fatal(err)
			}
		}
		return gathers() > before
	})
}

// A turn that accepts a client is connection churn: even with data on a
// relay beside it, it does not arm coalescing.
func TestAcceptingTurnDoesNotArmCoalescing(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}, wakeCoalesce: time.Millisecond})
	l := h.loops[0]
	a := h.open("p", k)
	defer a.close()
	a.ping(t)
	gathers := func() (n int) { h.on(l, func() { n = l.r.CoalescedWaits() }); return n }
	before := gathers()
	for range 5 {
		release := h.hold(l)
		a.client.Write([]byte("ping"))
		c := h.dial("p") // its accept is in the same turn as a's data
		time.Sleep(time.Millisecond)
		release()
		b := &proxied{client: c, backend: k.Next(t)}
		a.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := a.backend.Read(make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		b.close()
	}
	if n := gathers() - before; n != 0 {
		t.Fatalf("turns that accepted made %d coalesced waits, want 0", n)
	}
}
