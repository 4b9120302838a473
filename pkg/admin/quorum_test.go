package admin

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// belowQuorum is a Store of a fleet whose trip quorum is never reached:
// every trip is this instance's vote alone (breaker rule 9).
type belowQuorum struct{ *breaker.MemoryStore }

func (s belowQuorum) Vote(ctx context.Context, key string, seen uint64, _, _, _ time.Duration) (breaker.State, bool, bool, error) {
	st, err := s.Read(ctx, key)
	return st, false, err == nil && !st.Open && st.Generation == seen, err
}

func (belowQuorum) Unvote(context.Context, string) error { return nil }

// A breaker open on this instance alone shows as open, local_only, in the
// pools JSON, and in l4lb_breaker_open and l4lb_breaker_local_only; the
// generation stays the Store's.
func TestBreakerOpenAloneShows(t *testing.T) {
	p, b := runningPoolOn(t, belowQuorum{breaker.NewMemoryStore(nil)})
	h := Handler(Sources{Pools: []*pool.Pool{p}}, "", nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	p.EndDial(p.BeginDial(b, false), dialer.Failure)
	if st := b.Breaker(); !st.Open || !st.LocalOnly || st.Generation != 0 {
		t.Fatalf("after a refused dial below the quorum: %+v, want open alone at generation 0", st)
	}
	code, v := do(t, "GET", srv.URL+"/api/v1/pools/p", nil)
	backends, _ := v["backends"].([]any)
	if code != 200 || len(backends) != 1 {
		t.Fatalf("GET pool: %d %v", code, v)
	}
	be, _ := backends[0].(map[string]any)
	br, _ := be["breaker"].(map[string]any)
	if br["state"] != "open" || br["local_only"] != true || be["usable"] != false {
		t.Fatalf("the backend in the pool's JSON: %v, want breaker open, local_only, not usable", be)
	}

	body := string(goldenScrape(t, h, ""))
	for _, series := range []string{
		fmt.Sprintf(`l4lb_breaker_open{backend=%q,pool="p"} 1`, b.Addr),
		fmt.Sprintf(`l4lb_breaker_local_only{backend=%q,pool="p"} 1`, b.Addr),
		fmt.Sprintf(`l4lb_breaker_generation{backend=%q,pool="p"} 0`, b.Addr),
		fmt.Sprintf(`l4lb_breaker_trips_total{backend=%q,pool="p"} 1`, b.Addr),
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("no series %s in /metrics", series)
		}
	}
}
