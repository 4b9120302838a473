package server

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

func TestUDPEchoesEveryDatagramIntact(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	lb := startUDPLB(t, []string{a.Addr, b.Addr}, udpOpts{})
	sizes := []int{0, 1, 100, 1472, 1473, 9000, 32768, 65507}
	const clients = 20
	err := parallelDo(clients, func(i int) error {
		c := udpClient(t, lb.addr)
		for _, n := range sizes {
			p := make([]byte, n)
			rand.Read(p)
			got, err := ask(c, p)
			if err != nil {
				return err
			}
			if string(got) != string(p) {
				return fmt.Errorf("client %d: %d-byte datagram came back as %d different bytes", i, n, len(got))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := lb.front
	if got := f.Sessions.Load(); got != clients {
		t.Errorf("%d sessions open, want one per client (%d)", got, clients)
	}
	if a.Received() == 0 || b.Received() == 0 {
		t.Errorf("round robin over sessions left a backend idle: a %d, b %d datagrams", a.Received(), b.Received())
	}
	testnet.Eventually(t, "counters flushed", func() bool {
		return f.DatagramsToClient.Load() >= int64(clients*len(sizes)) && f.DatagramsToBackend.Load() >= int64(clients*len(sizes))
	})
	for r := range udpsession.NumDropReasons {
		if kernelDrop(r) {
			continue // 20 clients' 64 KiB datagrams at once can overflow the listener socket's buffer; ask sends again
		}
		if n := f.Drops[r].Load(); n != 0 {
			t.Errorf("%d datagrams dropped for %s", n, r)
		}
	}
}
