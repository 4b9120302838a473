package e2e

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// A connection with bytes in flight inside l4lb survives an upgrade: the
// backend sends 32 MiB to a client that reads nothing, until every buffer
// on the way is full and l4lb holds a splice pipe with bytes in it; then
// the upgrade, and once the old process is gone the client reads: every
// byte, in order, then EOF. The pipe's bytes cross to the new process (or
// a copy of them does); an l4lb that drains instead resets the connection
// 2 s after the upgrade, its pipe's bytes lost.
func TestHandoverKeepsBytesInFlight(t *testing.T) {
	testnet.CheckLeaks(t)
	b := startRawBackend(t)
	path, listen, adminAddr := handoverConfig(t, backendTOML(b.Addr))
	chain := startChain(t, l4lbBin, path)

	client := dialTCP(t, listen)
	toClient := b.next(t)
	data := patterned(32 << 20)
	var written atomic.Int64
	werr := make(chan error, 1)
	go func() {
		for off := 0; off < len(data); off += 64 << 10 {
			n, err := toClient.Write(data[off:min(off+64<<10, len(data))])
			written.Add(int64(n))
			if err != nil {
				werr <- err
				return
			}
		}
		werr <- toClient.CloseWrite()
	}()
	// Stalled: nothing written for half a second, and l4lb holds a pipe
	// with bytes it cannot pass on.
	var last int64
	var still int
	testnet.Eventually(t, "the backend to stall with l4lb holding bytes in a pipe", func() bool {
		time.Sleep(100 * time.Millisecond)
		if w := written.Load(); w != last {
			last, still = w, 0
			return false
		}
		still++
		return still >= 5 && last > 0 && e2eutil.Metric(t, adminAddr, `l4lb_splice_pipes{state="busy"}`) >= 1
	})
	t.Logf("the backend stalled after %d of %d bytes, l4lb holding a busy pipe", last, len(data))

	old, served := chain.upgrade(t)
	waitOldGone(t, old, served)

	client.SetReadDeadline(time.Now().Add(time.Minute))
	got, err := io.ReadAll(client)
	if werr := <-werr; werr != nil {
		t.Fatalf("the backend's sending: %v after %d bytes (reset: %v)", werr, written.Load(), isReset(werr))
	}
	if err != nil {
		t.Fatalf("the client read %d of %d bytes, then %v (reset: %v)", len(got), len(data), err, isReset(err))
	}
	if at := firstDiff(got, data); at >= 0 {
		t.Fatalf("the client read %d bytes, first differing at %d of %d", len(got), at, len(data))
	}
	checkHandedOver(t, chain.logText(), 1, 1, 0)
}
