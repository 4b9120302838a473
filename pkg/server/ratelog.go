package server

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// refusalLog turns a stream of refused clients into at most one log line
// per pool per period with a count, so an outage is visible in the log
// without the log becoming the outage. The first refusal after a quiet
// period is written at once; those that follow wait for the end of the
// period. Lines name the pool the clients were refused for: on a listener
// with SNI routes that is a route's pool as often as the listener's.
type refusalLog struct {
	every time.Duration
	emit  func(pool string, refused int64)

	mu      sync.Mutex
	pending map[string]int64 // by pool, in the running period
	timer   *time.Timer      // armed while a period runs
	stopped bool
}

func newRefusalLog(every time.Duration, emit func(pool string, refused int64)) *refusalLog {
	return &refusalLog{every: every, emit: emit, pending: map[string]int64{}}
}

// note counts one client of pool refused.
func (r *refusalLog) note(pool string) {
	r.mu.Lock()
	if r.timer != nil || r.stopped {
		r.pending[pool]++
		r.mu.Unlock()
		return // a line is due at the end of the running period
	}
	r.timer = time.AfterFunc(r.every, r.tick)
	r.mu.Unlock()
	r.emit(pool, 1)
}

// tick ends a period: it writes what came in during it, or goes quiet.
func (r *refusalLog) tick() {
	r.mu.Lock()
	if len(r.pending) == 0 || r.stopped {
		r.timer = nil
		r.mu.Unlock()
		return
	}
	due := r.take()
	r.timer.Reset(r.every)
	r.mu.Unlock()
	r.write(due)
}

// stop writes what is pending and ends the periods (at shutdown).
func (r *refusalLog) stop() {
	r.mu.Lock()
	r.stopped = true
	due := r.take()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.mu.Unlock()
	r.write(due)
}

// poolCount is one line due: a pool and its clients refused.
type poolCount struct {
	pool string
	n    int64
}

// take empties the pending counts into lines, in pool order (r.mu held).
func (r *refusalLog) take() []poolCount {
	due := make([]poolCount, 0, len(r.pending))
	for p, n := range r.pending {
		due = append(due, poolCount{p, n})
	}
	clear(r.pending)
	slices.SortFunc(due, func(a, b poolCount) int { return cmp.Compare(a.pool, b.pool) })
	return due
}

func (r *refusalLog) write(due []poolCount) {
	for _, d := range due {
		r.emit(d.pool, d.n)
	}
}
