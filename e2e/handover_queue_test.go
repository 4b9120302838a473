package e2e

import (
	"bufio"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// A client queued for a backend slot survives an upgrade: the backend
// takes one connection at a time (max_connections = 1, queue_timeout
// 30 s), one client holds the slot, a second waits in the queue, the
// upgrade, then the first closes. The second is served (by whichever
// process) and relays byte for byte, never reset, and the old process is
// gone within 5 s of the first's close: the queued client, once
// established, was handed over too. An l4lb that drains instead serves it
// from the old process and resets it 2 s after the upgrade.
func TestHandoverKeepsQueuedClient(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	path, listen, adminAddr := handoverConfig(t, "queue_timeout = \"30s\"\n"+backendTOML(b.Addr, "max_connections = 1"))
	chain := startChain(t, l4lbBin, path)

	holder := dialTCP(t, listen)
	if tag, err := bufio.NewReader(holder).ReadString('\n'); err != nil || tag != "b\n" {
		t.Fatalf("the first client: %q, %v", tag, err)
	}
	queued := dialTCP(t, listen)
	testnet.Eventually(t, "the second client to wait in the queue", func() bool {
		return e2eutil.Metric(t, adminAddr, "l4lb_client_connections_open") == 2
	})
	if n := b.Accepted(); n != 1 {
		t.Fatalf("the backend accepted %d connections, want 1: the second client should wait for the slot", n)
	}

	old, _ := chain.upgrade(t)
	holder.Close()
	freed := time.Now()
	r := bufio.NewReader(queued)
	if tag, err := r.ReadString('\n'); err != nil || tag != "b\n" {
		t.Fatalf("the queued client, once the slot freed: %q, %v (reset: %v)", tag, err, isReset(err))
	}
	waitOldGone(t, old, freed)
	sendAndClose(t, "the queued client's echo", queued, r, patterned(1<<20))
}
