package breaker

import (
	"context"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// MemoryStore is the default, embedded Store for one process. TTLs are kept
// as deadlines on the store's own clock, which is the only clock that ever
// reads them, so no two clocks are compared. The zero value is not usable;
// call NewMemoryStore.
type MemoryStore struct {
	clock clock.Clock

	mu       sync.Mutex
	gens     map[string]uint64 // never deleted, never decreased
	open     map[string]openEntry
	locks    map[string]probeLock
	disabled map[string]struct{}
	watch    memWatch
}

type openEntry struct {
	gen      uint64
	cooldown time.Duration
	until    time.Time
}

type probeLock struct {
	owner string
	until time.Time
}

// NewMemoryStore returns an empty store. c is the clock for TTLs; nil means
// clock.Real.
func NewMemoryStore(c clock.Clock) *MemoryStore {
	return &MemoryStore{
		clock:    clock.Or(c),
		gens:     make(map[string]uint64),
		open:     make(map[string]openEntry),
		locks:    make(map[string]probeLock),
		disabled: make(map[string]struct{}),
	}
}

var _ Store = (*MemoryStore)(nil)

// stateLocked builds the State of key; s.mu must be held.
func (s *MemoryStore) stateLocked(key string) State {
	st := State{Generation: s.gens[key]}
	_, st.Disabled = s.disabled[key]
	if e, ok := s.open[key]; ok {
		st.Open = true
		st.Cooldown = e.cooldown
		st.CooldownLeft = max(0, e.until.Sub(s.clock.Now()))
	}
	return st
}

// Read implements Store.
func (s *MemoryStore) Read(ctx context.Context, key string) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked(key), nil
}

// Trip implements Store.
func (s *MemoryStore) Trip(ctx context.Context, key string, seen uint64, cooldown, ttl time.Duration) (State, bool, error) {
	if err := ctx.Err(); err != nil {
		return State{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, isOpen := s.open[key]; isOpen || s.gens[key] != seen {
		return s.stateLocked(key), false, nil
	}
	s.gens[key]++
	s.open[key] = openEntry{gen: s.gens[key], cooldown: cooldown, until: s.clock.Now().Add(ttl)}
	s.changedLocked(key, false)
	return s.stateLocked(key), true, nil
}

// Close implements Store.
func (s *MemoryStore) Close(ctx context.Context, key string, gen uint64) (State, bool, error) {
	if err := ctx.Err(); err != nil {
		return State{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, isOpen := s.open[key]; !isOpen || e.gen != gen {
		return s.stateLocked(key), false, nil
	}
	delete(s.open, key)
	s.gens[key]++
	s.changedLocked(key, false)
	return s.stateLocked(key), true, nil
}

// Reopen implements Store.
func (s *MemoryStore) Reopen(ctx context.Context, key string, gen uint64, cooldown, ttl time.Duration) (State, bool, error) {
	if err := ctx.Err(); err != nil {
		return State{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, isOpen := s.open[key]; !isOpen || e.gen != gen {
		return s.stateLocked(key), false, nil
	}
	s.gens[key]++
	s.open[key] = openEntry{gen: s.gens[key], cooldown: cooldown, until: s.clock.Now().Add(ttl)}
	s.changedLocked(key, false)
	return s.stateLocked(key), true, nil
}

// AcquireProbe implements Store.
func (s *MemoryStore) AcquireProbe(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if l, held := s.locks[key]; held && now.Before(l.until) {
		return false, nil
	}
	s.locks[key] = probeLock{owner: owner, until: now.Add(ttl)}
	return true, nil
}

// ReleaseProbe implements Store.
func (s *MemoryStore) ReleaseProbe(ctx context.Context, key, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, held := s.locks[key]; held && l.owner == owner {
		delete(s.locks, key)
	}
	return nil
}

// Disable implements Store.
func (s *MemoryStore) Disable(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disabled[key] = struct{}{}
	s.changedLocked(key, false)
	return nil
}

// Enable implements Store.
func (s *MemoryStore) Enable(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.disabled, key)
	s.changedLocked(key, false)
	return nil
}

// Mirror makes st the state of key, as a shared store reported it: a fleet
// store keeps a MemoryStore as its local copy, to decide on alone while the
// shared one is out of reach. A generation is never lowered (a report
// older than what the copy holds changes nothing and Mirror returns
// false); the cooldown runs out st.CooldownLeft from now on this store's
// clock.
func (s *MemoryStore) Mirror(key string, st State) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Generation < s.gens[key] {
		return false
	}
	s.gens[key] = st.Generation
	if st.Open {
		s.open[key] = openEntry{gen: st.Generation, cooldown: st.Cooldown, until: s.clock.Now().Add(st.CooldownLeft)}
	} else {
		delete(s.open, key)
	}
	if st.Disabled {
		s.disabled[key] = struct{}{}
	} else {
		delete(s.disabled, key)
	}
	s.changedLocked(key, false)
	return true
}
