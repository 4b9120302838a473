package pick

import (
	"sync"
	"testing"
	"time"
)

// TestConcurrentPick runs many goroutines picking from one picker per
// algorithm while backends flap, as accept loops do; run with -race.
func TestConcurrentPick(t *testing.T) {
	const goroutines, picks = 8, 2_000
	for _, alg := range Algorithms {
		t.Run(alg, func(t *testing.T) {
			st := newState(6)
			start := time.Now()
			st.since[2].Store(start.UnixNano())
			p := mustNew(t, equalBackends(6), st, Config{Algorithm: alg, SlowStart: time.Second, HashBalanceFactor: balanceFor(alg)})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := range picks {
					st.down[i%6].Store(i%2 == 0)
				}
			})
			errs := make(chan string, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					dst := make([]int, 0, 3)
					for i := range picks {
						dst = p.Pick(client(g*picks+i), 3, dst[:0])
						for k, b := range dst {
							if b < 0 || b >= 6 || (k > 0 && dst[k-1] == b) {
								errs <- "bad pick"
								return
							}
							st.active[b].Add(1)
							st.active[b].Add(-1)
						}
						if i%100 == 0 {
							p.Order(client(i), nil)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}
