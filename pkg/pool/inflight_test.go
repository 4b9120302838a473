package pool_test

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// A burst of clients against three backends, one of which drops SYNs (its
// accept queue is full): load-aware pickers must count each dial from the
// moment it is chosen (the loop's BeginDial), or the backend whose dials
// hang looks idle forever and attracts the whole burst.
func TestBurstDoesNotPileOntoABackendThatDropsSYNs(t *testing.T) {
	for _, tc := range []struct{ name, extra string }{
		{"least-conn", `algorithm = "least-conn"`},
		{"p2c", `algorithm = "p2c"`},
		{"bounded-load hashing", "algorithm = \"consistent-hash\"\nhash_key = \"source-ip-port\"\nhash_balance_factor = 1.25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frozen := testnet.FrozenBackend(t) // first: ties go its way
			a := testnet.StartBackend(t, "a", "")
			b := testnet.StartBackend(t, "b", "")
			p := newLB(t, []string{frozen, a.Addr, b.Addr}, tc.extra+"\nretries = 0\nconnect_timeout = \"1s\"\n"+
				"[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1000")
			// Clients arrive a few ms apart (each from its own source
			// port), each relayed and held once connected: the live
			// backends' counts rise at once, while every dial to the
			// frozen one hangs for connect_timeout.
			const clients = 30
			var mu sync.Mutex
			var held []net.Conn
			var wg sync.WaitGroup
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range clients {
				wg.Go(func() {
					c, err := net.DialTimeout("tcp", p.addr, 10*time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					c.SetReadDeadline(time.Now().Add(30 * time.Second))
					if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
						c.Close() // turned away: its dial timed out
						return
					}
					mu.Lock()
					held = append(held, c)
					mu.Unlock()
				})
				time.Sleep(5 * time.Millisecond) // pacing only; nothing is timed
			}
			wg.Wait()
			_, stuck := dials(p.Pool, frozen, pool.DialClient)
			if stuck > clients/2 {
				t.Fatalf("%d of %d clients of a burst were sent to the backend that drops SYNs", stuck, clients)
			}
			if int(stuck)+len(held) != clients {
				t.Fatalf("%d stuck + %d served != %d clients", stuck, len(held), clients)
			}
			fb, _ := p.Backend(frozen)
			if n := fb.Active(); n != 0 {
				t.Fatalf("failed dials left %d connections counted on the frozen backend", n)
			}
			var live int64
			for _, lb := range p.Backends()[1:] {
				live += lb.Active()
			}
			if live != int64(len(held)) {
				t.Fatalf("the live backends count %d connections, want the %d held relays", live, len(held))
			}
		})
	}
}

// The count covers a connection from its dial to the end of its relay: a
// dial in flight counts, a relay counts until it ends, and a dial called
// off (its client left) or failed gives the count back.
func TestActiveCountsFromDialToTheEndOfTheRelay(t *testing.T) {
	be := testnet.StartBackend(t, "a", "")
	frozen := testnet.FrozenBackend(t)
	p := newLB(t, []string{be.Addr, frozen}, "retries = 0\nconnect_timeout = \"10s\"\n[pool.p.health]\nenabled = false")
	b, fb := p.Backends()[0], p.Backends()[1]

	c := p.dial(t)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if tag, err := bufio.NewReader(c).ReadString('\n'); err != nil || tag != "a\n" {
		t.Fatalf("first client got %q (%v), want backend a (round robin)", tag, err)
	}
	if b.Active() != 1 {
		t.Fatalf("active while relaying = %d, want 1", b.Active())
	}
	c.Close()
	testnet.Eventually(t, "the relay's count to be given back", func() bool { return b.Active() == 0 })

	// Round robin: the next client goes to the backend that drops SYNs.
	c = p.dial(t)
	testnet.Eventually(t, "the dial in flight to count", func() bool { return fb.Active() == 1 })
	c.SetLinger(0)
	c.Close() // the client leaves mid-dial
	testnet.Eventually(t, "the dial called off to give its count back", func() bool { return fb.Active() == 0 })
	p.idle(t)
	if ok, failed := fb.Dials(pool.DialClient); ok+failed != 0 {
		t.Fatalf("a dial called off was recorded: %d ok / %d failed", ok, failed)
	}
}
