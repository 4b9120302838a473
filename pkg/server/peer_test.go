package server

import (
	"bufio"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A client that shuts its write side before sending anything and then
// reads its reply is still there: a FIN says "nothing more to send". Its
// failed first dial must be retried on the next backend (and blamed on the
// refused one), not dropped as if the client had left.
func TestHalfClosedClientIsRetriedAndServed(t *testing.T) {
	noLeaks(t)
	live := testnet.StartBackend(t, "live", "")
	refused := closedAddr(t)
	text := poolTOML(t, "round-robin", []string{refused, live.Addr},
		"retries = 1\n[pool.p.breaker]\nfailures = 1000\n[pool.p.health]\nenabled = false\n")
	l := startLB(t, text, 0)
	const clients = 6 // round robin: half of them try the refused backend first
	for i := range clients {
		c := dial(t, l.addr)
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || line != "live\n" {
			t.Fatalf("half-closed client %d got %q (%v), want the live backend's reply", i, line, err)
		}
	}
	b, _ := l.pools["p"].Backend(refused)
	if _, failed := b.Dials(pool.DialClient); failed == 0 {
		t.Fatal("the refused backend's failed dials were never counted: the half-closed clients were taken as gone")
	}
	if s := l.listener("front"); s.OK != clients || s.Rejected != 0 || s.Failed != 0 {
		t.Fatalf("listener counters %+v, want %d ok", s, clients)
	}
}
