package pool

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A burst of clients against three backends, one of which drops SYNs (its
// accept queue is full): load-aware pickers must count each dial from the
// moment it is chosen, or the backend whose dials hang looks idle forever
// and attracts the whole burst.
func TestBurstDoesNotPileOntoABackendThatDropsSYNs(t *testing.T) {
	for _, tc := range []struct{ name, extra string }{
		{"least-conn", `algorithm = "least-conn"`},
		{"p2c", `algorithm = "p2c"`},
		{"bounded-load hashing", "algorithm = \"consistent-hash\"\nhash_key = \"source-ip-port\"\nhash_balance_factor = 1.25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := tc.extra
			frozen := testnet.FrozenBackend(t) // first: ties go its way
			a := testnet.StartBackend(t, "a", "")
			b := testnet.StartBackend(t, "b", "")
			p := newPool(t, []string{frozen, a.Addr, b.Addr}, extra+"\nretries = 0\nconnect_timeout = \"1s\"\n"+
				"[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1000")
			// Clients arrive a few ms apart, each relayed once connected:
			// the live backends' counts rise at once, while every dial to
			// the frozen one hangs for connect_timeout.
			const clients = 30
			var mu sync.Mutex
			var held []*Relaying
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					src := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", 20000+i))
					up, err := p.Connect(context.Background(), src, nil)
					if err != nil {
						return
					}
					cl, sv := tcpPair(t)
					t.Cleanup(func() { cl.Close() })
					r := p.StartRelay(sv, up)
					mu.Lock()
					held = append(held, r)
					mu.Unlock()
				})
				time.Sleep(5 * time.Millisecond) // pacing only; nothing is timed
			}
			wg.Wait()
			defer func() {
				for _, r := range held {
					r.Cut()
					r.Wait()
				}
			}()
			_, stuck := dials(p, frozen, DialClient)
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
		})
	}
}

// The count covers a connection from its dial to the end of its relay, and
// a released upstream gives it back.
func TestActiveCountsFromDialToRelease(t *testing.T) {
	be := testnet.StartBackend(t, "a", "")
	p := newPool(t, []string{be.Addr}, "[pool.p.health]\nenabled = false")
	b := p.Backends()[0]
	up, err := p.Connect(context.Background(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Active() != 1 {
		t.Fatalf("active after dial = %d, want 1", b.Active())
	}
	cl, sv := tcpPair(t)
	r := p.StartRelay(sv, up)
	if b.Active() != 1 {
		t.Fatalf("active while relaying = %d, want 1", b.Active())
	}
	cl.Close()
	r.Wait()
	if b.Active() != 0 {
		t.Fatalf("active after the relay = %d, want 0", b.Active())
	}
	up, err = p.Connect(context.Background(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	up.Release()
	if b.Active() != 0 {
		t.Fatalf("active after Release = %d, want 0", b.Active())
	}
}
