package e2e

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A connection to a backend that left its pool while it finished (here
// `l4lb ctl remove -timeout`, as DNS discovery or a reload drop one) goes
// on through an upgrade, byte for byte, until its own end. Before, neither
// process had the backend any more, and the upgrade reset it.
func TestUpgradeKeepsAConnectionToARemovedBackend(t *testing.T) {
	testnet.CheckLeaks(t)
	file, added := startRawBackend(t), startRawBackend(t)
	path, listen, admin := handoverConfig(t, backendTOML(file.Addr))
	chain := startChain(t, l4lbBin, path)
	for _, args := range [][]string{{"add", "p", added.Addr}, {"disable", "p", file.Addr}} {
		if code, out := ctlRun(t, admin, args...); code != 0 {
			t.Fatalf("l4lb ctl %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	c := dialTCP(t, listen)
	b := added.next(t)
	payload := patterned(64 << 10)
	echoThrough(t, "before the removal", c, b, payload)
	if code, out := ctlRun(t, admin, "remove", "p", added.Addr, "-timeout", "5m"); code != 0 {
		t.Fatalf("l4lb ctl remove: exit %d\n%s", code, out)
	}
	echoThrough(t, "removed, before the upgrade", c, b, payload)
	checkLeaving(t, admin, added.Addr, "removed, before the upgrade")

	old, served := chain.upgrade(t)
	waitOldGone(t, old, served)
	echoThrough(t, "after the upgrade, the old process gone", c, b, payload)
	checkLeaving(t, admin, added.Addr, "after the upgrade")
	checkHandedOver(t, chain.logText(), 1, 1, 0)
	if log := chain.logText(); strings.Contains(log, "neither process could carry on") || strings.Contains(log, "refused in a hand-over") {
		t.Errorf("the upgrade refused the connection:\n%s", log)
	}
	sendAndClose(t, "the client's last bytes", c, b, payload)
}

// echoThrough sends payload from the client to the backend and back, each
// checked byte for byte.
func echoThrough(t *testing.T, when string, client, backend *net.TCPConn, payload []byte) {
	t.Helper()
	for _, leg := range []struct {
		what     string
		from, to *net.TCPConn
	}{{"to the backend", client, backend}, {"to the client", backend, client}} {
		werr := make(chan error, 1)
		go func() { _, err := leg.from.Write(payload); werr <- err }()
		got := make([]byte, len(payload))
		_, err := io.ReadFull(leg.to, got)
		if werr := <-werr; werr != nil {
			t.Fatalf("%s: writing %s: %v (reset: %v)", when, leg.what, werr, isReset(werr))
		}
		if err != nil {
			t.Fatalf("%s: reading %s: %v (reset: %v)", when, leg.what, err, isReset(err))
		}
		if i := firstDiff(got, payload); i >= 0 {
			t.Fatalf("%s: %s differs at byte %d", when, leg.what, i)
		}
	}
}

// checkLeaving checks that pool p's JSON shows addr as leaving with its
// one connection.
func checkLeaving(t *testing.T, admin, addr, when string) {
	t.Helper()
	code, body := adminCall(t, "GET", "http://"+admin+"/api/v1/pools/p", "")
	want := fmt.Sprintf(`"leaving":[{"addr":%q,"active_connections":1}]`, addr)
	if code != 200 || !strings.Contains(body, want) {
		t.Errorf("%s: pool p answers %d %s, want %s in it", when, code, body, want)
	}
}
