package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// The data path never waits on Redis: with Async breakers (as l4lb runs
// them on a fleet Store) Done hands transitions to the breaker's Run, so
// an event loop reporting dials is as fast with Redis out of reach as with
// it answering. 1000 failed dials reported while A's link to Redis is cut
// off (refused) or stalled (every call hangs until its timeout) take less,
// in all, than one store call could: a single Done waiting on the Store
// would take the whole Timeout.
func TestDataPathNeverWaitsOnTheStore(t *testing.T) {
	const timeout = 250 * time.Millisecond
	for _, mode := range []string{"cut", "stalled"} {
		t.Run(mode, func(t *testing.T) {
			h := newFleet(t)
			p := startProxy(t, h.srv.Addr)
			const key = "web/10.0.2.1:80"
			s := h.store(func(c *Config) { c.RedisURL, c.Timeout = p.URL(), timeout }, Options{})
			a := h.instance("A", s, key, trips(3, time.Minute, defaultBreaker.MaxCooldown), nil)
			h.start(nil, a)

			if mode == "cut" {
				p.Cut()
			} else {
				p.Stall()
				// Through the stalled link a Redis call hangs for its whole
				// deadline: what a Done that waited would cost.
				r := s.remote.Load()
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				start := time.Now()
				err := r.ping(ctx)
				took := time.Since(start)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) || took < timeout {
					t.Fatalf("a call through the stalled proxy: %v after %v; want it to hang until its deadline (%v)", err, took, timeout)
				}
			}

			// The best of three rounds, each on a breaker of its own: a
			// machine too busy to run the loop can slow one round, while a
			// Done that waited on the Store would slow every one by whole
			// timeouts.
			var best time.Duration
			for round := range 3 {
				in := a
				if round > 0 {
					in = h.instance("A", s, key+"/"+itoa(uint64(round)), trips(3, time.Minute, defaultBreaker.MaxCooldown), nil)
					h.start(nil, in)
				}
				var total time.Duration
				for range 1000 {
					start := time.Now()
					in.b.Done(in.b.Begin(breaker.KindClient), breaker.Failure)
					total += time.Since(start)
				}
				t.Logf("%s, round %d: 1000 failed dials reported in %v (timeout %v)", mode, round+1, total, timeout)
				if round == 0 || total < best {
					best = total
				}
				if best < timeout/10 {
					break
				}
			}
			if best >= timeout {
				t.Fatalf("1000 Done calls took at best %v with Redis %s, more than one store call's timeout (%v): Done waited on the Store", best, mode, timeout)
			}
			// The trip they asked for is made off the data path: on the
			// local copy, once the Store gave Redis up.
			testnet.Eventually(t, "A trips locally", func() bool { return a.b.State().Open })
			if s.Up() {
				t.Fatal("store up with its link to Redis " + mode)
			}
		})
	}
}
