package e2e

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// The hand-over under a fake systemd (NOTIFY_SOCKET, the watchdog on), as
// the shipped unit runs it: SIGUSR2 to the main process (systemctl kill
// --kill-whom=main --signal=SIGUSR2) with connections open. The old
// process tells systemd MAINPID=<new pid> and is gone within 5 s, never
// saying STOPPING=1; the new process pings the watchdog, its STATUS=
// counts the connections it adopted, and they relay on, every message
// echoed once, in order.
func TestHandoverUnderSystemd(t *testing.T) {
	const conns = 3
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	path, listen, _ := e2eutil.WriteConfig(t, "", []string{b.Addr}, "[global]\nshutdown_timeout = \"2s\"")
	systemd := testnet.StartFakeSystemd(t)
	t.Setenv("NOTIFY_SOCKET", systemd.Path)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "")
	chain := startChain(t, l4lbBin, path)
	old := chain.pid
	systemd.WaitFor(t, "READY=1 from l4lb", func(n testnet.Notification) bool { return n.PID == old && n.Has("READY", "1") })
	fleet := startSeqFleet(t, listen, "b", conns, 100*time.Millisecond)
	fleet.waitEchoedSince(t, time.Now(), "before the upgrade")
	want := strconv.Itoa(conns) + " connections; pools: p 1/1"
	systemd.WaitFor(t, "STATUS= counting the connections", func(n testnet.Notification) bool {
		return n.PID == old && n.Has("STATUS", want)
	})

	_, served := chain.signalUpgrade(t)
	next := chain.pid
	_, before := systemd.WaitFor(t, "MAINPID= naming the new process", func(n testnet.Notification) bool {
		return n.PID == old && n.Has("MAINPID", strconv.Itoa(next))
	})
	gone := waitOldGone(t, old, served)
	fleet.waitEchoedSince(t, gone, "after the upgrade (old pid gone)")
	// STATUS= is sent when the counts change, so it may come before any
	// of the notifications waited for above or below: look in what those
	// waits passed over too.
	counted := func(n testnet.Notification) bool { return n.PID == next && n.Has("STATUS", want) }
	_, meanwhile := systemd.WaitFor(t, "a watchdog ping from the new process", func(n testnet.Notification) bool {
		return n.PID == next && n.Has("WATCHDOG", "1")
	})
	if !slices.ContainsFunc(append(before, meanwhile...), counted) {
		_, more := systemd.WaitFor(t, "the new process's STATUS= to count the adopted connections", counted)
		meanwhile = append(meanwhile, more...)
	}
	before = append(before, meanwhile...)
	for _, n := range append(before, systemd.Pending(t)...) {
		if n.PID == old && n.Has("STOPPING", "1") {
			t.Fatalf("the old process told systemd it is stopping (%q): an upgrade is no stop", n.Raw)
		}
	}
	fleet.finish(t)
	checkHandedOver(t, chain.logText(), 1, conns, 0)
}
