package health

import (
	"container/heap"
	"context"
	"math"
	mathrand "math/rand/v2"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// A Scheduler runs the checks of many Probers without a goroutine each:
// one goroutine keeps every added prober in a heap ordered by its next
// check and hands the checks that come due to worker goroutines, started
// on demand and parked when idle, at most workers of them (a Prober.Run
// goroutine per backend instead costs a goroutine stack each, grown by
// the dial to about 8 KiB: bench/healthscale measures both).
//
// Checks are spread over the interval. The k-th prober added to a
// Scheduler is checked first at phase frac(x + k·φ) of its Interval (the
// golden ratio's low-discrepancy sequence; x is random per Scheduler),
// counted on the Scheduler's own clock, so probers added together or apart
// never bunch. Later checks follow a fixed grid, one slot every Interval
// after the first, each check timed within ±2% of its slot (Options.Rand)
// and started up to 1% of Interval before that time when another check is
// due then (they share the dispatcher's wakeup): start to start, two checks
// are Interval ±5% apart. The grid does not drift, so checks that had to
// start late (a stalled process, all workers busy) go back to their phases
// at the next slot instead of staying bunched; a check that overruns its
// slot is followed by the first slot after it returns, never by a second
// check in flight.
//
// A prober's semantics are those of Run: the check gets Timeout, rise and
// fall, Inconclusive, OnChange (called on the worker that made the check),
// Seed, Up and Status are the same; one check per prober is in flight at
// most.
//
// The Scheduler's goroutines run only while it holds probers: once every
// prober added has been removed and its check returned, they exit, and the
// next Add starts them again. A Scheduler is safe for concurrent use; the
// zero value is not usable, call NewScheduler.
type Scheduler struct {
	clock  clock.Clock
	max    int       // at most this many checks at once; 0: no bound
	epoch  time.Time // the phases' origin
	offset float64   // x, the phase sequence's start

	mu      sync.Mutex
	due     entryHeap // probers waiting for their next check, earliest first
	seq     uint64    // probers added so far: the next one's index in the phase sequence
	entries int       // probers added and not yet finished (waiting or in a check)
	running int       // checks in flight
	driving bool      // the dispatching goroutine runs
	wake    chan struct{}
	idle    []*worker // parked workers, the most recently parked last
	workers int       // worker goroutines alive
}

// workerIdle is how long a parked worker waits for a check before it
// exits. The dispatcher hands checks to the most recently parked worker,
// so the workers a burst of slow checks (timeouts) started and the steady
// rate does not need park at the bottom and exit.
const workerIdle = 10 * time.Second

// NewScheduler returns a Scheduler that runs at most workers checks at
// once; workers <= 0 sets no bound but the one check in flight per prober.
//
// A bound holds the checker's sockets and goroutines under it when many
// backends time out, at the price of late checks: checks that come due
// while every worker is busy wait for one, earliest first. A bound that
// never delays a check is at least (probers × the longest a check takes) /
// Interval, which for checks that time out is probers × Timeout / Interval:
// 500 for 1,000 backends at the defaults (2 s, 1 s). Checks that pass or
// are refused take well under a millisecond, and a handful of workers run
// thousands of them.
func NewScheduler(workers int) *Scheduler { return NewSchedulerWithClock(workers, nil) }

// NewSchedulerWithClock is NewScheduler on clock c (nil: clock.Real), which
// times the checks, places their phases and retires idle workers. A
// check's Timeout stays real time: the check waits on the network.
func NewSchedulerWithClock(workers int, c clock.Clock) *Scheduler {
	c = clock.Or(c)
	return &Scheduler{
		clock:  c,
		max:    max(workers, 0),
		epoch:  c.Now(),
		offset: mathrand.Float64(),
		wake:   make(chan struct{}, 1),
	}
}

// phi is the golden ratio's fractional part: consecutive multiples of it
// modulo 1 fall in the largest gap left by the ones before.
var phi = (math.Sqrt(5) - 1) / 2

// entry is one prober on a Scheduler.
type entry struct {
	p        *Prober
	ctx      context.Context
	slot     time.Time // the grid slot of the next check (or the one in flight)
	at       time.Time // when the next check starts: slot ± jitter
	index    int       // in Scheduler.due; -1 when not there
	checking bool      // a worker runs its check
	removed  bool      // its ctx is done: no further check
	done     chan struct{}
}

// Add checks p on s until ctx is done, and returns a wait that blocks
// until then and until p's check in flight, if any, has returned (a check
// called off by ctx is not recorded, as in Run). A Prober is run by Run or
// by one Add, once. With Enabled false Add schedules nothing, and wait
// returns at once.
func (s *Scheduler) Add(ctx context.Context, p *Prober) (wait func()) {
	if !p.cfg.Enabled {
		return func() {}
	}
	e := &entry{p: p, ctx: ctx, index: -1, done: make(chan struct{})}
	iv := p.cfg.Interval
	s.mu.Lock()
	phase := math.Mod(s.offset+float64(s.seq)*phi, 1)
	s.seq++
	now := s.clock.Now()
	into := now.Sub(s.epoch) % iv // where now falls in the interval, from the epoch
	if into < 0 {
		into += iv
	}
	e.slot = now.Add((time.Duration(phase*float64(iv)) - into + iv) % iv)
	e.at = e.slot
	heap.Push(&s.due, e)
	s.entries++
	if !s.driving {
		s.driving = true
		go s.drive()
	}
	s.signal()
	s.mu.Unlock()
	context.AfterFunc(ctx, func() { s.remove(e) })
	return func() { <-e.done }
}

// remove takes e off s once its ctx is done.
func (s *Scheduler) remove(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.removed = true
	if e.checking {
		return // its worker finishes it when the check returns
	}
	if e.index >= 0 {
		heap.Remove(&s.due, e.index)
	}
	s.finish(e)
}

// finish ends e; s.mu is held.
func (s *Scheduler) finish(e *entry) {
	s.entries--
	close(e.done)
	s.signal()
}

// signal wakes the dispatcher: the heap's top, the checks in flight or the
// probers held changed. s.mu is held, or it need not be.
func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drive is the dispatcher: it starts the checks that are due, on as many
// workers as s allows, and sleeps until the next one is due or something
// changes. It returns when s holds no prober.
func (s *Scheduler) drive() {
	timer, tick := s.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := s.clock.Now()
		for len(s.due) > 0 && s.free() && !s.due[0].at.Add(-s.due[0].early()).After(now) {
			e := heap.Pop(&s.due).(*entry)
			e.checking = true
			s.running++
			s.dispatch(e)
		}
		// The workers parked longest, past workerIdle, exit.
		for len(s.idle) > 0 && now.Sub(s.idle[0].since) >= workerIdle {
			s.release(s.idle[0])
			s.idle = s.idle[1:]
		}
		if s.entries == 0 {
			for _, w := range s.idle {
				s.release(w)
			}
			s.idle = nil
			s.driving = false
			s.mu.Unlock()
			return
		}
		// Sleep until the next check is due (if a worker is free for it)
		// or the longest parked worker is to exit, whichever is first.
		var next time.Time
		if len(s.due) > 0 && s.free() {
			next = s.due[0].at
		}
		if len(s.idle) > 0 {
			if reap := s.idle[0].since.Add(workerIdle); next.IsZero() || reap.Before(next) {
				next = reap
			}
		}
		s.mu.Unlock()
		if next.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(max(next.Sub(now), 0))
		}
		select {
		case <-tick:
		case <-s.wake:
		}
	}
}

// SchedulerStats is a Scheduler's state at one instant.
type SchedulerStats struct {
	Probers  int // added and not yet finished
	Checking int // checks in flight
	Workers  int // worker goroutines alive, parked or checking
}

// Stats returns s's state now.
func (s *Scheduler) Stats() SchedulerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SchedulerStats{Probers: s.entries, Checking: s.running, Workers: s.workers}
}

// free reports whether another check may start; s.mu is held.
func (s *Scheduler) free() bool { return s.max == 0 || s.running < s.max }

// worker is a goroutine that runs checks.
type worker struct {
	job   chan *entry // buffered 1; nil: exit
	since time.Time   // parked since
}

// dispatch hands e to the most recently parked worker, or to a new one;
// s.mu is held.
func (s *Scheduler) dispatch(e *entry) {
	if n := len(s.idle); n > 0 {
		w := s.idle[n-1]
		s.idle[n-1] = nil
		s.idle = s.idle[:n-1]
		w.job <- e
		return
	}
	s.workers++
	w := &worker{job: make(chan *entry, 1)}
	go s.work(w, e)
}

// release tells a parked worker to exit; s.mu is held.
func (s *Scheduler) release(w *worker) {
	s.workers--
	w.job <- nil
}

// work runs checks until it is released.
func (s *Scheduler) work(w *worker, e *entry) {
	for e != nil {
		jitter := s.check(e)
		s.mu.Lock()
		s.running--
		e.checking = false
		if e.removed {
			s.finish(e)
		} else {
			s.reschedule(e, jitter)
		}
		w.since = s.clock.Now()
		s.idle = append(s.idle, w)
		s.signal()
		s.mu.Unlock()
		e = <-w.job
	}
}

// check makes e's check, unless e's ctx is done already, and records its
// result unless e's ctx ended meanwhile. It returns the jitter of e's next
// check, drawn outside s.mu.
func (s *Scheduler) check(e *entry) float64 {
	p := e.p
	if e.ctx.Err() != nil {
		return 0 // removed: its removal is on its way (context.AfterFunc)
	}
	ctx, cancel := context.WithTimeout(e.ctx, p.cfg.Timeout)
	o := p.check(ctx)
	cancel()
	if e.ctx.Err() == nil {
		p.record(o)
	}
	return p.opts.Rand()
}

// jitterSpan is the width of the window around its slot a check is
// timed in, as a fraction of the interval: ±2%. The phases already spread
// the checks; the jitter keeps them off an exact period. Wider, it blurs
// the spread the phases give.
const jitterSpan = 0.04

// earlySpan is how far before its time a check may start, as a fraction
// of its interval (1%: 20 ms at 2 s), so that the checks due close
// together start on one wakeup of the dispatcher instead of one each: at
// 1,000 probers every 2 s, 500 checks a second 2 ms apart, the process's
// CPU per check halves (bench/healthscale), as its threads wake and park
// once for a handful of checks.
const earlySpan = 0.01

// early is how far before e.at e's check may start.
func (e *entry) early() time.Duration {
	return time.Duration(earlySpan * float64(e.p.cfg.Interval))
}

// reschedule puts e back in the heap at its next slot, the first after its
// current one that is not before now, jittered by ±2% of the interval
// (rand in [0, 1)); s.mu is held.
func (s *Scheduler) reschedule(e *entry, rand float64) {
	iv := e.p.cfg.Interval
	now := s.clock.Now()
	e.slot = e.slot.Add(iv)
	if late := now.Sub(e.slot); late > 0 {
		e.slot = e.slot.Add((late/iv + 1) * iv)
	}
	e.at = e.slot.Add(time.Duration((rand - 0.5) * jitterSpan * float64(iv)))
	if e.at.Before(now) {
		e.at = now
	}
	heap.Push(&s.due, e)
}

// entryHeap orders entries by their next check.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*h = old[:n-1]
	return e
}
