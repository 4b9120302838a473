package main

import (
	"context"
	"sync"

	"github.com/l4lb/l4lb/pkg/health"
)

// startScheduler adds every prober to one health.Scheduler, as a pool that
// adopted it would; wg is done once their checks have all returned.
func startScheduler(ctx context.Context, wg *sync.WaitGroup, probers []*health.Prober, workers int) *health.Scheduler {
	s := health.NewScheduler(workers)
	waits := make([]func(), len(probers))
	for i, p := range probers {
		waits[i] = s.Add(ctx, p)
	}
	wg.Go(func() {
		for _, w := range waits {
			w()
		}
	})
	return s
}
