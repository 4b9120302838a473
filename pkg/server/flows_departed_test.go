package server

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
	"github.com/l4lb/l4lb/pkg/relay"
)

// A connection made to a backend that has since left the pool (a reload,
// the API or discovery removed it while its connections finished) is
// handed over like any other and finishes in the new process, charged to
// no backend of the pool there. Before, the new process refused it (no
// such backend), the old one could not take it back for the same reason,
// and it was reset without a close record.
func TestServerAdoptsAConnectionToABackendThatLeftThePool(t *testing.T) {
	gone, stays := testnet.StartTaker(t), testnet.StartTaker(t)
	const noChecks = "[pool.p.health]\nenabled = false"
	old := startLB(t, poolTOML(t, "round-robin", []string{gone.Addr}, noChecks), 0)
	next := startLB(t, poolTOML(t, "round-robin", []string{stays.Addr}, noChecks), 0)

	const n = 2
	clients, backends := openThrough(t, old.addr, gone, n)
	b := &flow.Batch{}
	old.server.DetachFlows(b)
	if len(b.Relays) != n {
		t.Fatalf("detached %d relays, want %d", len(b.Relays), n)
	}
	handTo(t, next, b)
	for i := range clients {
		echoVia(t, clients[i], backends[i], "its backend gone from the pool")
	}
	if got := next.server.Active(); got != n {
		t.Errorf("the next server counts %d connections, want %d", got, n)
	}
	if got := next.pools["p"].Backends()[0].Active(); got != 0 {
		t.Errorf("the pool's remaining backend is charged %d connections it does not carry", got)
	}
	for i := range clients {
		clients[i].Close()
		backends[i].Close()
	}
	testnet.Eventually(t, "both to end as completed, counted", func() bool {
		return next.server.Active() == 0 && next.closesOf("front").Closed[relay.CloseCompleted] == n
	})
}

// A connection adopted on a backend whose drain deadline has passed here
// (it passed between this process building its pools and adopting, when
// there was nothing to cut) is cut at once, as the drain would have cut
// it; counted as drained.
func TestAdoptedConnectionPastItsBackendsDrainDeadlineIsCut(t *testing.T) {
	k := testnet.StartTaker(t)
	const noChecks = "[pool.p.health]\nenabled = false"
	old := startLB(t, poolTOML(t, "round-robin", []string{k.Addr}, noChecks), 0)
	next := startLB(t, poolTOML(t, "round-robin", []string{k.Addr}, noChecks), 0)
	clients, backends := openThrough(t, old.addr, k, 1)
	p := next.pools["p"]
	if err := p.Drain(context.Background(), p.Backends()[0], 0); err != nil { // its deadline now, nothing here yet
		t.Fatal(err)
	}
	b := &flow.Batch{}
	old.server.DetachFlows(b)
	handTo(t, next, b)
	clients[0].SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := clients[0].Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the client read %v, want a reset", err)
	}
	backends[0].SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := backends[0].Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the backend read %v, want a reset", err)
	}
	testnet.Eventually(t, "the cut counted as drained", func() bool {
		return next.server.Active() == 0 && next.closesOf("front").Closed[relay.CloseDrained] == 1
	})
}
