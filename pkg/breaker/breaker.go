package breaker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// The breaker's own timings, taken when Options leaves them 0. They are
// no configuration key: only tests set them otherwise.
const (
	snapshotRefresh = 500 * time.Millisecond
	probeLockTTL    = 10 * time.Second
	storeTimeout    = time.Second
)

// Options are a Breaker's injected dependencies; every field is optional.
type Options struct {
	// Clock is the local clock (monotonic use only) and makes Run's timer.
	// Store calls and probes stay bounded by real time (context deadlines):
	// they wait on the network. nil: clock.Real.
	Clock clock.Clock
	// Logger receives trips, closes (info), the probe-failure alert (warn)
	// and stale results (debug). The caller attaches the attributes that
	// name the backend; the breaker adds none of its own. nil: discard.
	Logger *slog.Logger
	// Events are the counter hooks.
	Events Events
	// Probe is the breaker's own recovery dial honouring ctx, classified
	// like a client dial (the pool makes it a TCP connect, or for UDP
	// backends a request or a refusal probe). nil: no background probes, so
	// only force-tries can close the breaker.
	Probe func(ctx context.Context) Result
	// Rand returns a float in [0, 1) for the cooldown jitter. nil:
	// math/rand/v2.
	Rand func() float64
	// SnapshotRefresh is how often Run re-reads the Store into the local
	// snapshot the hot path reads. 0: 500ms.
	SnapshotRefresh time.Duration
	// ProbeLockTTL bounds one probe: the lock's TTL and the probe's
	// deadline. 0: 10s.
	ProbeLockTTL time.Duration
	// StoreTimeout bounds Store calls made from Done. 0: 1s.
	StoreTimeout time.Duration
	// Owner is this instance's probe-lock token. "": random.
	Owner string
	// Async keeps Done off the Store: a transition Done decides (a trip, a
	// close) is handed to Run, which makes it against the Store. Set it
	// when the Store is remote and Done runs on the data path, which must
	// never wait on the network. Run must be running for such transitions
	// to happen; Allow and Begin keep answering from the snapshot meanwhile.
	Async bool
}

// asyncQueue bounds the transitions waiting for Run. They are rare (a trip,
// a close per generation) and coalesced, so a full queue means Run is stuck
// on an unreachable Store; a dropped trip is asked for again by the next
// failure, a dropped close by the next success. Either is counted
// (Events.Dropped).
const asyncQueue = 16

// Attempt is what a dial captured before its connect: its kind, the
// backend's generation at that moment, and this instance's local
// generation (quorum.go), which orders the opens and closes this instance
// made alone below the fleet's trip quorum; it stays 0 where there is no
// quorum.
type Attempt struct {
	Kind            Kind
	Generation      uint64
	LocalGeneration uint64
}

// snapshot is the hot path's view of the Store, with the local time it was
// read so CooldownLeft can be aged without comparing clocks, and the number
// of the read it came from (Breaker.reads), which orders the reads of one
// generation.
type snapshot struct {
	State
	readAt time.Time
	read   uint64
}

// Breaker applies the rules to one backend. It is safe for concurrent use;
// Allow and Begin take no lock.
type Breaker struct {
	key   string
	cfg   Config
	store Store
	opts  Options
	log   *slog.Logger

	snap     atomic.Pointer[snapshot]
	reads    atomic.Uint64 // Store reads and CAS calls issued: see publishRead
	probing  atomic.Bool
	probeNow atomic.Uint64 // generation+1 ProbeNow asked to probe at; 0: none. Run clears it when it acts
	wake     chan struct{} // ProbeNow and Store change notices wake Run; buffered 1

	ops        chan asyncOp  // Async transitions for Run
	tripQueued atomic.Uint64 // generation+1 of the trip in ops; 0: none

	// next is the breaker that replaced this one at a reload (HandOver);
	// results and queued transitions go on to it. nil: none.
	next atomic.Pointer[Breaker]
	// opsMu orders submit against Run's exit, so that no transition is
	// queued where no Run will ever take it without being forwarded or
	// counted (handover.go).
	opsMu   sync.Mutex
	stopped bool // Run has returned; guarded by opsMu

	// local is the open of this instance alone (below the trip quorum),
	// nil while there is none; localGen is the local generation, which
	// every local transition raises. Both change under mu and are read
	// lock-free (quorum.go).
	local    atomic.Pointer[localOpen]
	localGen atomic.Uint64

	mu       sync.Mutex // guards win and recovery, and orders local transitions
	win      *window
	recovery struct {
		gen, localGen uint64
		successes     int
	}
}

// New returns the breaker for key (the wiring uses "pool/addr"; instances
// sharing store must agree on it). cfg must be complete (see Config).
// The snapshot starts as read from store now.
func New(key string, cfg Config, store Store, opts Options) (*Breaker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Rand == nil {
		opts.Rand = mathrand.Float64
	}
	if opts.SnapshotRefresh <= 0 {
		opts.SnapshotRefresh = snapshotRefresh
	}
	if opts.ProbeLockTTL <= 0 {
		opts.ProbeLockTTL = probeLockTTL
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = storeTimeout
	}
	if opts.Owner == "" {
		opts.Owner = randomOwner()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Breaker{
		key:   key,
		cfg:   cfg,
		store: store,
		opts:  opts,
		log:   log,
		win:   newWindow(cfg, opts.Clock.Now()),
		wake:  make(chan struct{}, 1),
		ops:   make(chan asyncOp, asyncQueue),
	}
	b.snap.Store(&snapshot{readAt: opts.Clock.Now()})
	ctx, cancel := b.storeCtx()
	defer cancel()
	if err := b.Refresh(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func randomOwner() string {
	var buf [12]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(buf[:])
}

// Key returns the Store key the breaker was built with.
func (b *Breaker) Key() string { return b.key }

// Config returns the configuration New was given.
func (b *Breaker) Config() Config { return b.cfg }

// Allow reports, from the local snapshot, whether client dials may go to the
// backend: breaker closed and not manually disabled. Lock-free.
func (b *Breaker) Allow() bool {
	s := b.snap.Load()
	return !s.Open && !s.Disabled && b.local.Load() == nil
}

// Begin captures the backend's generation for a dial of kind k. Call it
// before the connect syscall and hand the Attempt to Done with the result.
func (b *Breaker) Begin(k Kind) Attempt {
	return Attempt{Kind: k, Generation: b.snap.Load().Generation, LocalGeneration: b.localGen.Load()}
}

// State returns the local snapshot, with CooldownLeft aged by the local
// time elapsed since it was read; while the breaker is open on this
// instance alone (LocalOnly), with that open's cooldown.
func (b *Breaker) State() State {
	s := b.snap.Load()
	st := s.State
	now := b.opts.Clock.Now()
	st.CooldownLeft = max(0, st.CooldownLeft-now.Sub(s.readAt))
	if lo := b.local.Load(); lo != nil && !st.Open {
		st.Open, st.LocalOnly = true, true
		st.Cooldown, st.CooldownLeft = lo.cooldown, max(0, lo.until.Sub(now))
	}
	return st
}

// Refresh re-reads the Store into the local snapshot. Run calls it every
// SnapshotRefresh; callers may call it to see a change at once.
func (b *Breaker) Refresh(ctx context.Context) error {
	nr := b.reads.Add(1)
	st, err := b.store.Read(ctx, b.key)
	if err != nil {
		return fmt.Errorf("breaker %s: read store: %w", b.key, err)
	}
	b.publishRead(st, nr)
	return nil
}

// Disable sets the manual disable in the Store (rule 5) and in the snapshot.
func (b *Breaker) Disable(ctx context.Context) error {
	if err := b.store.Disable(ctx, b.key); err != nil {
		return fmt.Errorf("breaker %s: disable: %w", b.key, err)
	}
	return b.Refresh(ctx)
}

// Enable clears the manual disable. Only an operator calls it.
func (b *Breaker) Enable(ctx context.Context) error {
	if err := b.store.Enable(ctx, b.key); err != nil {
		return fmt.Errorf("breaker %s: enable: %w", b.key, err)
	}
	return b.Refresh(ctx)
}

// publishRead installs st, the answer of Store call number n (taken from
// b.reads before the call was made), as the snapshot unless the snapshot
// already holds a newer generation, or the same generation from a call made
// after this one. A slow read must not roll the hot path back past a
// transition (rule 8), nor past an admin switch: the Refresh that Disable
// makes once the Store has the disable is numbered after every read that
// could have missed it, so no such read can undo the disable here once
// Disable has returned (rule 5), and likewise for Enable.
func (b *Breaker) publishRead(st State, n uint64) {
	next := &snapshot{State: st, readAt: b.opts.Clock.Now(), read: n}
	for {
		cur := b.snap.Load()
		if cur.Generation > st.Generation || (cur.Generation == st.Generation && cur.read > n) {
			return
		}
		if b.snap.CompareAndSwap(cur, next) {
			if st.Open {
				b.joinFleet(st)
			}
			if cur.Generation != st.Generation || cur.Open != st.Open || cur.Disabled != st.Disabled {
				callState(b.opts.Events.Changed, b.key, st)
			}
			return
		}
	}
}

func (b *Breaker) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.opts.StoreTimeout)
}
