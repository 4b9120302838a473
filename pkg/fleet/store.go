package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
)

// ErrStoreDown is wrapped by the error of an operation the Store refuses to
// make alone while Redis is out of reach: an enable made on one instance
// only would be undone, or worse, spread, by the next merge; a change of
// a pool's API-added backends (PutMembers) could undo, when written back,
// one made elsewhere meanwhile. Reads of what the Store never had an
// answer about (Members, MemberPools) wrap it too.
var ErrStoreDown = errors.New("the cluster store is unreachable")

// Options are a Store's injected dependencies; every field is optional.
type Options struct {
	Logger *slog.Logger
	// Observe is called after every Redis operation with its name (read,
	// trip, close, reopen, acquire_probe, release_probe, disable, enable,
	// merge, ping, members_read, members_write, unvote, shared_read,
	// shared_write), how long it took and its error.
	Observe func(op string, took time.Duration, err error)
	// Clock times Run: its checks of Redis and its tries to rejoin. Every
	// other time is real: cooldowns and probe locks are Redis's TTLs, on
	// Redis's clock, and Redis calls are bounded and measured in real
	// time. nil: clock.Real.
	Clock clock.Clock
	// CheckMembers tells a pool's members document this build can read
	// (nil error) from one it cannot, such as one edited by hand or
	// truncated: a record it refuses is unreadable (ErrMembersUnreadable)
	// and never taken. nil: every document is readable.
	CheckMembers func(doc []byte) error
}

// Store is the breaker.Store of an instance in a fleet. While Redis answers
// within Config.Timeout every decision is Redis's; while it does not, the
// instance decides alone on its local copy, marks what it changed, and
// merges that back when Redis answers again (reconcile.go). A call waits
// for Redis at most Config.Timeout, with two exceptions, both off the data
// path: a call made while the client is dialing waits for the dial (a
// second at least), and a local decision waits for a merge in progress.
type Store struct {
	cfg Config
	ks  keyspace
	opt rueidis.ClientOption
	log *slog.Logger
	obs func(string, time.Duration, error)
	// clock times Run (Options.Clock).
	clock clock.Clock
	// voter is this instance's name in the trip quorum's votes (quorum.go).
	voter string
	// checkMembers is Options.CheckMembers.
	checkMembers func(doc []byte) error

	remote atomic.Pointer[redisStore] // nil until the first connect
	up     atomic.Bool
	local  *breaker.MemoryStore
	kick   chan struct{} // wakes Run when an operation lost Redis

	// mu orders local decisions against the merge: a key decided on
	// locally is in apart until the merge has written it back, true when
	// its breaker state (trip, close, re-open) was decided locally, false
	// when only a disable was.
	mu    sync.Mutex
	apart map[string]bool
	// seen orders what reaches the local copy, under mu: for each key,
	// the number (from seq) of the Redis answer its disable was last
	// taken from (mirrorLocked).
	seq  atomic.Uint64
	seen map[string]uint64
	// probes are the probe locks taken on the local copy while apart, by
	// key and owner, with when they run out; owed are the releases that
	// could not be made in Redis while apart. Under mu; rejoin hands both
	// over to Redis before Redis decides again: the locks before the
	// merge, the releases after it (takeRunningProbes, releaseOwedProbes).
	probes map[probeID]time.Time
	owed   map[probeID]struct{}
	// catching are the keys a catchUp is under way for, under mu: one at
	// a time per key (catchUp).
	catching map[string]struct{}

	wmu      sync.Mutex
	watchers map[string]map[*watch]struct{}
	memos    map[string]*openMemo // per watched key (openmemo.go)

	// members are the pools' API-added backends (members.go).
	members memberState
	// shared are the fleet's drains and weights (drains.go).
	shared sharedState

	resync        atomic.Bool  // Redis lost its data: write every local key back
	epoch         atomic.Value // string: the fleet marker's value when last seen
	stats         stats
	lastSync      atomic.Int64 // unix nanoseconds of the last answer from Redis
	invalidations atomic.Uint64
	reconciled    atomic.Uint64
}

type watch struct{ changed func() }

// probeID is one owner's probe lock of one key.
type probeID struct{ key, owner string }

var (
	_ breaker.Store    = (*Store)(nil)
	_ breaker.Notifier = (*Store)(nil)
)

// New builds the Store and tries to join Redis once, for at most about
// cfg.Timeout (a second at least to dial). An unreachable Redis is no
// error: the instance starts deciding locally, says so, and Run keeps
// trying. Bad options are.
func New(cfg Config, opts Options) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:          cfg,
		ks:           keyspace{prefix: cfg.KeyPrefix},
		voter:        voter(cfg),
		log:          opts.Logger,
		obs:          opts.Observe,
		clock:        clock.Or(opts.Clock),
		checkMembers: opts.CheckMembers,
		local:        breaker.NewMemoryStore(nil),
		kick:         make(chan struct{}, 1),
		apart:        map[string]bool{},
		seen:         map[string]uint64{},
		probes:       map[probeID]time.Time{},
		owed:         map[probeID]struct{}{},
		catching:     map[string]struct{}{},
		watchers:     map[string]map[*watch]struct{}{},
		memos:        map[string]*openMemo{},
		members:      newMemberState(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	opt, err := cfg.clientOption()
	if err != nil {
		return nil, err
	}
	opt.OnInvalidations = s.invalidated
	s.opt = opt
	if err := s.rejoin(context.Background()); err != nil {
		s.log.Warn("cluster store unreachable at start: deciding locally until it answers", "error", err)
	}
	return s, nil
}

// connect makes the client if there is none yet.
// lockPoolIdle is how long a probe-lock connection (redisStore.locks) may
// sit idle before it is closed: probes come a cooldown apart, and a burst
// of them (a fleet-wide blip, its cooldowns ending together) leaves no
// standing pool behind.
const lockPoolIdle = 30 * time.Second

func (s *Store) connect() error {
	if s.remote.Load() != nil {
		return nil
	}
	c, err := rueidis.NewClient(s.opt)
	if err != nil {
		return err
	}
	r := &redisStore{client: c, ks: s.ks, cacheTTL: s.cfg.SyncInterval}
	if m := c.Mode(); m == rueidis.ClientModeSentinel || m == rueidis.ClientModeCluster {
		lo := s.opt
		lo.DisableCache, lo.ClientTrackingOptions, lo.OnInvalidations = true, nil, nil
		lo.BlockingPoolCleanup, lo.BlockingPoolMinSize = lockPoolIdle, 0
		locks, err := rueidis.NewClient(lo)
		if err != nil {
			c.Close()
			return err
		}
		r.locks, r.replicaWait = locks, max(s.cfg.Timeout/2, time.Millisecond)
	}
	s.remote.Store(r)
	return nil
}

// Up reports whether decisions are Redis's right now.
func (s *Store) Up() bool { return s.up.Load() }

// SnapshotAge is how long ago Redis last answered this instance: how old
// its view of the fleet's state may be.
func (s *Store) SnapshotAge() time.Duration {
	last := s.lastSync.Load()
	if last == 0 {
		return 0
	}
	return time.Since(time.Unix(0, last))
}

// Invalidations counts the keys the server said were written that this
// instance holds (a watched breaker's state fields, the membership
// documents): broadcast tracking tells of every write, this instance's
// own included.
func (s *Store) Invalidations() uint64 { return s.invalidations.Load() }

// Reconciled counts keys merged back after an outage.
func (s *Store) Reconciled() uint64 { return s.reconciled.Load() }

func (s *Store) observe(op string, took time.Duration, err error) {
	s.stats.observe(op, took, err)
	if s.obs != nil {
		s.obs(op, took, err)
	}
}

func (s *Store) synced() { s.lastSync.Store(time.Now().UnixNano()) }

// call runs op on Redis if the Store is up, bounded by the timeout; ok
// false means the caller must decide locally (Redis is, or just went,
// out of reach).
func (s *Store) call(ctx context.Context, name string, op func(ctx context.Context, r *redisStore) error) (ok bool, err error) {
	r := s.remote.Load()
	if r == nil || !s.up.Load() {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	start := time.Now()
	err = op(rctx, r)
	cancel()
	s.observe(name, time.Since(start), err)
	if err == nil {
		s.synced()
		return true, nil
	}
	if ctx.Err() != nil {
		return true, err // the caller gave up: says nothing about Redis
	}
	if !unreachable(err) {
		// Redis answered, with an error about this operation (a key of
		// the wrong type, a script failing on what a key holds): the
		// operation fails, and the instance stays with the fleet.
		s.synced()
		return true, err
	}
	s.lost(name, err)
	return false, nil
}

// lost turns the Store to local decisions and wakes Run to keep trying.
func (s *Store) lost(op string, err error) {
	if s.up.CompareAndSwap(true, false) {
		s.forgetAll() // a read in flight now must not leave a memo behind
		s.log.Warn("cluster store unreachable: deciding locally until it answers again", "op", op, "error", err)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// mirror keeps the local copy at what Redis answered an operation begun
// at at (a number from s.seq), except for keys decided on locally and not
// merged yet: their local decision is what the merge must see.
func (s *Store) mirror(key string, st breaker.State, at uint64) {
	s.mu.Lock()
	if _, ok := s.apart[key]; !ok {
		s.mirrorLocked(key, st, at)
	}
	s.mu.Unlock()
}

// mirrorLocked puts st, Redis's answer to an operation begun at at, in the
// local copy without ever taking it backwards. The generation never goes
// down (MemoryStore.Mirror refuses an older one). The disable, which no
// generation orders, is taken from the answer only if the operation began
// after the one it was last taken from, and after this instance's last
// Disable or Enable was answered: an answer given before those may say
// what Redis held before them. s.mu must be held.
func (s *Store) mirrorLocked(key string, st breaker.State, at uint64) {
	newer := at > s.seen[key]
	if !newer {
		cur, _ := s.local.Read(context.Background(), key)
		st.Disabled = cur.Disabled
	}
	if s.local.Mirror(key, st) && newer {
		s.seen[key] = at
	}
}

// decideLocally runs op on the local copy while the Store is down, marking
// the key apart when op changed it. retry is true when Redis came back
// meanwhile, so the caller asks Redis instead.
func (s *Store) decideLocally(key string, op func() (changed bool, err error)) (retry bool, err error) {
	return s.decideLocallyAs(key, true, op)
}

// decideLocallyAs is decideLocally; state says whether op decides the
// breaker state (false: only a disable, whose merge must not write back
// the local copy's open entry, a mirror of what Redis said before).
func (s *Store) decideLocallyAs(key string, state bool, op func() (changed bool, err error)) (retry bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up.Load() {
		return true, nil
	}
	changed, err := op()
	if changed {
		s.apart[key] = s.apart[key] || state
	}
	return false, err
}

// Read implements breaker.Store. A watched open breaker is answered from
// its memo while the cooldown runs (openmemo.go).
func (s *Store) Read(ctx context.Context, key string) (breaker.State, error) {
	for {
		st, ver, memo := s.recall(key)
		if memo {
			return st, nil
		}
		at := s.seq.Add(1)
		ok, err := s.call(ctx, "read", func(ctx context.Context, r *redisStore) (err error) {
			st, err = r.Read(ctx, key)
			return err
		})
		if ok {
			if err == nil {
				s.mirror(key, st, at)
				st, _ = s.catchUp(ctx, key, st)
				s.remember(key, ver, st)
			}
			return st, err
		}
		retry, err := s.decideLocally(key, func() (bool, error) {
			st, err = s.local.Read(ctx, key)
			return false, err
		})
		if !retry {
			return st, err
		}
	}
}

// transition is Trip, Close and Reopen: the compare-and-set on Redis, or
// on the local copy while apart.
func (s *Store) transition(ctx context.Context, name, key string, op func(context.Context, breaker.Store) (breaker.State, bool, error)) (breaker.State, bool, error) {
	for {
		var st breaker.State
		var done bool
		at := s.seq.Add(1)
		ok, err := s.call(ctx, name, func(ctx context.Context, r *redisStore) (err error) {
			st, done, err = op(ctx, r)
			return err
		})
		s.forget(key) // written, or may have been
		if ok {
			if err == nil {
				s.mirror(key, st, at)
				if caught, lost := s.catchUp(ctx, key, st); lost {
					// Redis had lost the key: what was asked is moot.
					return caught, false, nil
				}
			}
			return st, done, err
		}
		retry, err := s.decideLocally(key, func() (bool, error) {
			var err error
			st, done, err = op(ctx, s.local)
			return done, err
		})
		if !retry {
			if done {
				s.log.Info("cluster store unreachable: breaker decided locally, to be merged back", "key", key, "op", name, "generation", st.Generation)
			}
			return st, done, err
		}
	}
}

// Trip implements breaker.Store.
func (s *Store) Trip(ctx context.Context, key string, seen uint64, cooldown, ttl time.Duration) (breaker.State, bool, error) {
	return s.transition(ctx, "trip", key, func(ctx context.Context, st breaker.Store) (breaker.State, bool, error) {
		return st.Trip(ctx, key, seen, cooldown, ttl)
	})
}

// Close implements breaker.Store.
func (s *Store) Close(ctx context.Context, key string, gen uint64) (breaker.State, bool, error) {
	return s.transition(ctx, "close", key, func(ctx context.Context, st breaker.Store) (breaker.State, bool, error) {
		return st.Close(ctx, key, gen)
	})
}

// Reopen implements breaker.Store.
func (s *Store) Reopen(ctx context.Context, key string, gen uint64, cooldown, ttl time.Duration) (breaker.State, bool, error) {
	return s.transition(ctx, "reopen", key, func(ctx context.Context, st breaker.Store) (breaker.State, bool, error) {
		return st.Reopen(ctx, key, gen, cooldown, ttl)
	})
}

// AcquireProbe implements breaker.Store: the fleet-wide lock while Redis
// answers, this instance's own while it does not.
func (s *Store) AcquireProbe(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	for {
		var got bool
		ok, err := s.call(ctx, "acquire_probe", func(ctx context.Context, r *redisStore) (err error) {
			got, err = r.AcquireProbe(ctx, key, owner, ttl)
			return err
		})
		if ok {
			if got {
				s.forget(key) // the prober's read under the lock is Redis's
			}
			if err == nil && !got {
				s.heldElsewhere(ctx, key, owner, ttl)
			}
			return got, err
		}
		retry, err := s.decideLocally(key, func() (bool, error) {
			var err error
			got, err = s.local.AcquireProbe(ctx, key, owner, ttl)
			if got {
				s.probes[probeID{key, owner}] = time.Now().Add(ttl)
			}
			return false, err
		})
		if !retry {
			return got, err
		}
	}
}

// heldElsewhere keeps in the local copy that another instance holds key's
// probe lock, for at most ttl (the bound of its probe): should Redis be
// lost meanwhile (its master dies while that instance probes), this one,
// deciding alone, does not probe the same backend beside it. The local
// lock has an owner no instance releases; it only ever counts while apart,
// and runs out with the other's probe.
func (s *Store) heldElsewhere(ctx context.Context, key, owner string, ttl time.Duration) {
	_, _ = s.local.AcquireProbe(context.WithoutCancel(ctx), key, owner+" (held elsewhere)", ttl) // MemoryStore fails only on a done ctx
}

// ReleaseProbe implements breaker.Store. The lock may have been taken on
// either side of an outage, so both are released (only the owner's). A
// release Redis cannot be told of while apart is owed, and made when it
// answers again, after the merge and before Redis decides for this
// instance (releaseOwedProbes).
func (s *Store) ReleaseProbe(ctx context.Context, key, owner string) error {
	id := probeID{key, owner}
	for {
		ok, err := s.call(ctx, "release_probe", func(ctx context.Context, r *redisStore) error {
			return r.ReleaseProbe(ctx, key, owner)
		})
		if ok {
			s.mu.Lock()
			delete(s.probes, id)
			s.mu.Unlock()
			if lerr := s.local.ReleaseProbe(ctx, key, owner); err == nil {
				err = lerr
			}
			return err
		}
		retry, err := s.decideLocally(key, func() (bool, error) {
			delete(s.probes, id)
			s.owed[id] = struct{}{}
			return false, s.local.ReleaseProbe(ctx, key, owner)
		})
		if !retry {
			return err
		}
	}
}

// Disable implements breaker.Store. While apart it is kept locally and
// written back by the merge: a disable is always safe to spread.
func (s *Store) Disable(ctx context.Context, key string) error {
	for {
		ok, err := s.call(ctx, "disable", func(ctx context.Context, r *redisStore) error {
			return r.Disable(ctx, key)
		})
		s.forget(key)
		if ok {
			if err == nil {
				// The local copy must hold it too, should Redis be
				// lost before anything re-reads the key (rule 5).
				s.mirrorDisabled(ctx, key, true)
			}
			return err
		}
		retry, err := s.decideLocallyAs(key, false, func() (bool, error) {
			return true, s.local.Disable(ctx, key)
		})
		if !retry {
			return err
		}
	}
}

// Enable implements breaker.Store. It needs Redis: an operator's enable
// must reach the whole fleet or no one, and the merge never spreads one.
func (s *Store) Enable(ctx context.Context, key string) error {
	ok, err := s.call(ctx, "enable", func(ctx context.Context, r *redisStore) error {
		return r.Enable(ctx, key)
	})
	s.forget(key)
	if !ok {
		return fmt.Errorf("enable %s: %w: retry when it is back (l4lb_cluster_store_up 1)", key, ErrStoreDown)
	}
	if err == nil {
		s.mirrorDisabled(ctx, key, false)
	}
	return err
}

// mirrorDisabled keeps the local copy's disable at what Redis was just
// told, like mirror: not for a key decided on locally since.
func (s *Store) mirrorDisabled(ctx context.Context, key string, disabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.apart[key]; ok {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if disabled {
		_ = s.local.Disable(ctx, key) // MemoryStore fails only on a done ctx
	} else {
		_ = s.local.Enable(ctx, key)
	}
	// Redis has it now: any answer to an operation begun before is no
	// newer (mirrorLocked).
	s.seen[key] = s.seq.Add(1)
}
