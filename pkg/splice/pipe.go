package splice

import (
	"errors"
	"fmt"
	"sync"
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

// PipePool hands out pipes to streams and takes them back once drained. It
// caps the number of pipes in existence so the process keeps its fd budget,
// and keeps a bounded number idle so bursts do not pay pipe2 and fcntl.
// The zero value is not usable; use NewPipePool.
type PipePool struct {
	size    int
	maxOpen int
	maxIdle int
	now     func() time.Time

	mu           sync.Mutex
	idle         []*pipe
	open         int
	starvedUntil time.Time
}

// PipePoolConfig sizes a PipePool.
type PipePoolConfig struct {
	// Size is the capacity asked of each pipe with F_SETPIPE_SZ.
	Size int
	// MaxOpen caps pipes in existence, idle or busy; past it streams copy.
	MaxOpen int
	// MaxIdle caps pipes kept open while unused.
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
	return &PipePool{size: cfg.Size, maxOpen: cfg.MaxOpen, maxIdle: cfg.MaxIdle, now: cfg.Now}
}

// get returns an empty pipe, or nil when none can be had right now.
func (pp *PipePool) get() *pipe {
	pp.mu.Lock()
	if n := len(pp.idle); n > 0 {
		p := pp.idle[n-1]
		pp.idle[n-1] = nil
		pp.idle = pp.idle[:n-1]
		pp.mu.Unlock()
		return p
	}
	if pp.open >= pp.maxOpen || pp.now().Before(pp.starvedUntil) {
		pp.mu.Unlock()
		return nil
	}
	pp.open++
	pp.mu.Unlock()

	p, err := newPipe(pp.size)
	if err != nil {
		pp.mu.Lock()
		pp.open--
		pp.starvedUntil = pp.now().Add(starveBackoff)
		pp.mu.Unlock()
		return nil
	}
	return p
}

// put takes back a drained pipe.
func (pp *PipePool) put(p *pipe) {
	pp.mu.Lock()
	if len(pp.idle) < pp.maxIdle {
		pp.idle = append(pp.idle, p)
		pp.mu.Unlock()
		return
	}
	pp.open--
	pp.mu.Unlock()
	p.close()
}

// discard closes a pipe that may still hold data (its connection was cut).
func (pp *PipePool) discard(p *pipe) {
	p.close()
	pp.mu.Lock()
	pp.open--
	pp.mu.Unlock()
}

// PipeStats is a snapshot of a pool's pipes.
type PipeStats struct {
	Open int // in existence, idle or busy
	Idle int // in the pool, empty
}

// Busy is the number of pipes held by streams right now.
func (s PipeStats) Busy() int { return s.Open - s.Idle }

// Stats returns how many pipes exist and how many are idle.
func (pp *PipePool) Stats() PipeStats {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return PipeStats{Open: pp.open, Idle: len(pp.idle)}
}

// Trim closes every idle pipe, e.g. at shutdown. Busy pipes are unaffected.
func (pp *PipePool) Trim() {
	pp.mu.Lock()
	idle := pp.idle
	pp.idle = nil
	pp.open -= len(idle)
	pp.mu.Unlock()
	for _, p := range idle {
		p.close()
	}
}
