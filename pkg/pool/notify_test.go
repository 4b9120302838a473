package pool_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/l4lb/l4lb/pkg/dialer"
)

// The pool tells its picker of every change of a backend's load, so
// least-conn over a pool larger than a picker polls per pick (16) still
// answers exactly: the backend whose relay just ended is the next pick,
// not one within the next n/16 picks.
func TestLeastConnLearnsEveryLoadChange(t *testing.T) {
	var backends []string
	for i := range 64 {
		backends = append(backends, fmt.Sprintf("127.0.0.1:%d", 20000+i))
	}
	p := newPool(t, backends, "algorithm = \"least-conn\"\nretries = 0\n[pool.p.health]\nenabled = false\n")
	client := netip.MustParseAddrPort("192.0.2.1:1000")
	var buf [17]int
	// Two connections on every backend.
	for range 2 * len(backends) {
		cands, _ := p.Plan(client, buf[:0])
		d := p.BeginDial(p.At(cands[0]), false)
		p.EndDial(d, dialer.Success)
	}
	for i := range backends {
		if a := p.At(i).Active(); a != 2 {
			t.Fatalf("backend %d has %d connections, want 2 (least-conn spreads evenly)", i, a)
		}
	}
	// Each relay that ends makes its backend the least loaded: the very
	// next pick must be it, wherever it sits in the pool.
	for _, i := range []int{37, 5, 63, 20, 48} {
		p.EndRelay(p.At(i))
		cands, _ := p.Plan(client, buf[:0])
		if len(cands) != 1 || cands[0] != i {
			t.Fatalf("after backend %d's relay ended the pick is %v, want [%d]", i, cands, i)
		}
		p.EndDial(p.BeginDial(p.At(i), false), dialer.Success) // back to 2
	}
}
