package breaker

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Many goroutines dial concurrently while the breaker trips, probes, re-opens
// and closes. Run under -race. Invariants: every observed generation is at
// least the one observed before it, and the Store's generation equals the
// number of transitions reported.
func TestConcurrentBeginDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Cooldown: time.Second, MaxCooldown: 4 * time.Second, Successes: 2}, func(o *Options) {
			o.SnapshotRefresh = 50 * time.Millisecond
			o.Probe = func(context.Context) Result { return Result(rand.IntN(2)) }
		})
		stop := run(f.b)
		var wg sync.WaitGroup
		var regress atomic.Int64
		for w := range 32 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				var seen uint64
				for range 300 {
					k := []Kind{KindClient, KindClient, KindForce, KindProbe}[rng.IntN(4)]
					a := f.b.Begin(k)
					if a.Generation < seen {
						regress.Add(1)
					}
					seen = a.Generation
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
					f.b.Done(a, Result(rng.IntN(3)))
					f.b.Allow()
				}
			})
		}
		wg.Wait()
		stop()
		if n := regress.Load(); n != 0 {
			t.Fatalf("%d goroutines saw the generation go down", n)
		}
		transitions := f.ev.n("trip") + f.ev.n("close") + f.ev.n("reopen")
		if st := f.storeState(); st.Generation != uint64(transitions) {
			t.Fatalf("store generation %d != transitions reported %d", st.Generation, transitions)
		}
		t.Logf("trips=%d closes=%d reopens=%d stale=%d", f.ev.n("trip"), f.ev.n("close"), f.ev.n("reopen"), f.ev.n("stale"))
		if f.ev.n("trip") == 0 || f.ev.n("close") == 0 {
			t.Fatalf("load did not exercise trips and closes: trips=%d closes=%d", f.ev.n("trip"), f.ev.n("close"))
		}
	})
}
