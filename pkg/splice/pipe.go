package splice

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// minUsefulPipe is the smallest pipe worth splicing through. An unprivileged
// user over fs.pipe-user-pages-soft gets 2-page pipes; splicing 8 KiB at a
// time costs more CPU than copying, so such a pipe is refused.
const minUsefulPipe = 64 << 10

// starveBackoff is how long the pool stops creating pipes after the kernel
// refused one, so a spent quota costs no pipe2/fcntl/close per chunk.
const starveBackoff = time.Second

// errPipeTooSmall: the kernel would not give a pipe of useful size.
var errPipeTooSmall = errors.New("splice: kernel gave a pipe too small to be useful")

// pipe is one kernel pipe used as a splice buffer. It is empty whenever it
// sits in a pool.
type pipe struct {
	r, w int
	size int
}

func newPipe(size int) (*pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("splice: pipe2: %w", err)
	}
	p := &pipe{r: fds[0], w: fds[1]}
	got, err := unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, size)
	if err != nil {
		// Over the per-user soft quota, or size above pipe-max-size for an
		// unprivileged user: keep the pipe only if what we have is useful.
		got, err = unix.FcntlInt(uintptr(p.w), unix.F_GETPIPE_SZ, 0)
		if err != nil || got < min(size, minUsefulPipe) {
			p.close()
			return nil, errPipeTooSmall
		}
	}
	p.size = got
	return p, nil
}

func (p *pipe) close() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// PipePool is the process's pipes: it caps how many exist, so the
// process keeps its fd budget, and bounds how many are kept idle so bursts
// do not pay pipe2 and fcntl. Each loop takes its pipes through a
// PipeCache of its own, which keeps the idle ones: a stream takes and
// gives back a pipe on every streaming burst, and that costs no lock and
// no write to memory shared with other loops; the pool is touched only
// when a pipe is made or closed. The zero value is not usable; use
// NewPipePool.
type PipePool struct {
	size    int
	maxOpen int64
	maxIdle int
	now     func() time.Time
	epoch   time.Time

	open atomic.Int64
	// starvedUntil: no pipe is made before this time, in ns since epoch
	// (0: none refused yet).
	starvedUntil atomic.Int64
	ncaches      atomic.Int64
	// wanted: a loop found the pool at its cap and no pipe in its own
	// cache, while other caches may hold idle ones; the next cache to
	// publish with one idle closes it, so the cap's slot goes where a
	// stream wants it instead of waiting unused in another loop.
	wanted atomic.Bool

	mu     sync.Mutex // caches: registration and Stats, never the hot path
	caches map[*PipeCache]struct{}
}

// PipePoolConfig sizes a PipePool.
type PipePoolConfig struct {
	// Size is the capacity asked of each pipe with F_SETPIPE_SZ.
	Size int
	// MaxOpen caps pipes in existence, idle or busy; past it streams copy.
	MaxOpen int
	// MaxIdle caps pipes kept open while unused, in all: each cache keeps
	// an equal share (at least one).
	MaxIdle int
	// Now is the clock for the starvation back-off; nil means time.Now.
	Now func() time.Time
}

// NewPipePool returns an empty pool; pipes are created on demand.
func NewPipePool(cfg PipePoolConfig) *PipePool {
	if cfg.Size <= 0 {
		cfg.Size = 1 << 20
	}
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = 512
	}
	if cfg.MaxIdle < 0 || cfg.MaxIdle > cfg.MaxOpen {
		cfg.MaxIdle = cfg.MaxOpen
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &PipePool{size: cfg.Size, maxOpen: int64(cfg.MaxOpen), maxIdle: cfg.MaxIdle, now: cfg.Now,
		epoch: cfg.Now(), caches: map[*PipeCache]struct{}{}}
}

// PipeCache is one loop's way to the pool: it keeps the pipes the loop's
// streams gave back, up to its share of the pool's MaxIdle, for the next
// stream. Its methods are for its owner's goroutine only: taking and giving
// back a pipe costs no atomic operation (two atomic stores, publishing the
// idle count on every get and put, took ~20 ns of a ~25 ns get/put); the
// loop publishes the count once per wake-up (Publish). Close gives its
// pipes back when the loop stops.
type PipeCache struct {
	pool      *PipePool
	idle      []*pipe
	published atomic.Int64 // len(idle) as last published, for Stats
	closed    bool
}

// NewCache returns a cache for one loop.
func (pp *PipePool) NewCache() *PipeCache {
	c := &PipeCache{pool: pp}
	pp.mu.Lock()
	pp.caches[c] = struct{}{}
	pp.ncaches.Store(int64(len(pp.caches)))
	pp.mu.Unlock()
	return c
}

// idleShare is how many idle pipes one cache may keep.
func (pp *PipePool) idleShare() int {
	if pp.maxIdle == 0 {
		return 0
	}
	return max(1, pp.maxIdle/int(max(1, pp.ncaches.Load())))
}

// get returns an empty pipe, or nil when none can be had right now.
func (c *PipeCache) get() *pipe {
	if n := len(c.idle); n > 0 {
		p := c.idle[n-1]
		c.idle[n-1] = nil
		c.idle = c.idle[:n-1]
		return p
	}
	return c.pool.make()
}

// make creates a pipe under the pool's cap, unless the kernel refused one
// less than starveBackoff ago.
func (pp *PipePool) make() *pipe {
	if until := pp.starvedUntil.Load(); until != 0 && int64(pp.now().Sub(pp.epoch)) < until {
		return nil
	}
	for {
		n := pp.open.Load()
		if n >= pp.maxOpen {
			if pp.ncaches.Load() > 1 && !pp.wanted.Load() {
				pp.wanted.Store(true)
			}
			return nil
		}
		if pp.open.CompareAndSwap(n, n+1) {
			break
		}
	}
	p, err := newPipe(pp.size)
	if err != nil {
		pp.open.Add(-1)
		pp.starvedUntil.Store(int64(pp.now().Add(starveBackoff).Sub(pp.epoch)))
		return nil
	}
	return p
}

// put takes back a drained pipe. At the pool's cap, with other loops, it
// is closed rather than kept: another loop may want one.
func (c *PipeCache) put(p *pipe) {
	pp := c.pool
	if !c.closed && len(c.idle) < pp.idleShare() &&
		(pp.open.Load() < pp.maxOpen || pp.ncaches.Load() == 1) {
		c.idle = append(c.idle, p)
		return
	}
	c.discard(p)
}

// discard closes a pipe that may still hold data (its connection was cut).
func (c *PipeCache) discard(p *pipe) {
	p.close()
	c.pool.open.Add(-1)
}

// Trim closes the cache's idle pipes.
func (c *PipeCache) Trim() {
	for i, p := range c.idle {
		c.discard(p)
		c.idle[i] = nil
	}
	c.idle = c.idle[:0]
	c.Publish()
}

// Publish makes the cache's idle count what Stats reports, and gives up
// an idle pipe another loop found missing at the pool's cap (wanted).
func (c *PipeCache) Publish() {
	if n := len(c.idle); n > 0 && c.pool.wanted.Load() && c.pool.wanted.CompareAndSwap(true, false) {
		c.discard(c.idle[n-1])
		c.idle[n-1] = nil
		c.idle = c.idle[:n-1]
	}
	if n := int64(len(c.idle)); c.published.Load() != n {
		c.published.Store(n)
	}
}

// Close closes the cache's idle pipes and leaves the pool, when its loop
// stops; a pipe given back later (none should be) is closed.
func (c *PipeCache) Close() {
	if c.closed {
		return
	}
	c.Trim()
	c.closed = true
	pp := c.pool
	pp.mu.Lock()
	delete(pp.caches, c)
	pp.ncaches.Store(int64(len(pp.caches)))
	pp.mu.Unlock()
}

// PipeStats is a snapshot of a pool's pipes.
type PipeStats struct {
	Open int // in existence, idle or busy
	Idle int // in the caches, empty
}

// Busy is the number of pipes held by streams right now.
func (s PipeStats) Busy() int { return s.Open - s.Idle }

// Stats returns how many pipes exist and how many are idle, as the caches
// last published them (a loop does once per wake-up). Safe from any
// goroutine; while loops move pipes it is a moment's view, not exact.
func (pp *PipePool) Stats() PipeStats {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	idle := 0
	for c := range pp.caches {
		idle += int(c.published.Load())
	}
	return PipeStats{Open: int(pp.open.Load()), Idle: idle}
}
