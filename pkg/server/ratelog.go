package server

import (
	"sync"
	"time"
)

// refusalLog turns a stream of refused clients into at most one log line
// per period with a count, so an outage is visible in the log without the
// log becoming the outage. The first refusal after a quiet period is
// written at once; those that follow wait for the end of the period.
type refusalLog struct {
	every time.Duration
	emit  func(refused int64)

	mu      sync.Mutex
	pending int64
	timer   *time.Timer // armed while a period runs
	stopped bool
}

func newRefusalLog(every time.Duration, emit func(refused int64)) *refusalLog {
	return &refusalLog{every: every, emit: emit}
}

// note counts one refused client.
func (r *refusalLog) note() {
	r.mu.Lock()
	r.pending++
	if r.timer != nil || r.stopped {
		r.mu.Unlock()
		return // a line is due at the end of the running period
	}
	n := r.pending
	r.pending = 0
	r.timer = time.AfterFunc(r.every, r.tick)
	r.mu.Unlock()
	r.emit(n)
}

// tick ends a period: it writes what came in during it, or goes quiet.
func (r *refusalLog) tick() {
	r.mu.Lock()
	n := r.pending
	r.pending = 0
	if n == 0 || r.stopped {
		r.timer = nil
		r.mu.Unlock()
		return
	}
	r.timer.Reset(r.every)
	r.mu.Unlock()
	r.emit(n)
}

// stop writes what is pending and ends the periods (at shutdown).
func (r *refusalLog) stop() {
	r.mu.Lock()
	r.stopped = true
	n := r.pending
	r.pending = 0
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.mu.Unlock()
	if n > 0 {
		r.emit(n)
	}
}
