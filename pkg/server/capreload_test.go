package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/relay"
)

// A reload between a set and a derived max_connections changes the cap
// and whether the old process's connections count against it in one
// step: the loops, reading the cap as they admit each client
// (relay.Shared.Cap), never see the new cap with the old count. Before,
// Reload stored the cap and SetCapFromFDLimit the count after it, and a
// reader between the two saw a derived cap of 1000 with the set cap's 5
// counted beside it (or 10 with none).
func TestReloadChangesTheCapAndWhatCountsAgainstItAtOnce(t *testing.T) {
	noLeaks(t)
	const set, derived, held = 10, 1000, 5
	setCap, derivedCap := ConnCap{MaxConnections: set}, ConnCap{MaxConnections: derived, Derived: true}
	want := map[ConnCap]relay.Cap{setCap: {Max: set, Elsewhere: held}, derivedCap: {Max: derived}}
	s, err := New(Config{MaxConnections: set, Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	s.Serve()
	s.HeldElsewhere(held) // as the old process of an upgrade reports

	var stop atomic.Bool
	seen := make(chan relay.Cap, 1) // the first pair that is neither
	reads := make(chan int, 1)
	go func() {
		n := 0
		for ; !stop.Load(); n++ {
			if c := s.sh.Cap(); c != want[setCap] && c != want[derivedCap] {
				select {
				case seen <- c:
				default:
				}
			}
		}
		reads <- n
	}()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		c := setCap
		if i%2 == 0 {
			c = derivedCap
		}
		if _, err := s.Reload(nil, c); err != nil {
			t.Fatal(err)
		}
		if got := s.sh.Cap(); got != want[c] {
			t.Fatalf("reload %d to %+v left the loops %+v, want %+v", i, c, got, want[c])
		}
	}
	stop.Store(true)
	n := <-reads
	select {
	case c := <-seen:
		t.Fatalf("a loop read max %d with %d counted elsewhere (in %d reads); want max %d with %d, or %d with 0",
			c.Max, c.Elsewhere, n, set, held, derived)
	default:
	}
}
