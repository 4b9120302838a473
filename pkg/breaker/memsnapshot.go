package breaker

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// MemorySnapshot is what a MemoryStore holds that the process replacing
// this one (a binary upgrade) must keep: every generation, every open
// entry with its cooldown as time remaining, and every manual disable.
//
// Cooldowns travel as durations, never as deadlines: the new process
// counts the time left on its own clock from the moment it restores, so
// no two clocks are compared (rule 7). Probe locks are left out: a probe
// in flight belongs to the process running it, and its result never
// reaches the new process's store.
type MemorySnapshot struct {
	Entries []SnapshotEntry
}

// SnapshotEntry is one key's state in a MemorySnapshot.
type SnapshotEntry struct {
	Key        string
	Generation uint64
	Open       bool
	// Cooldown is the open entry's nominal cooldown (what a failed probe
	// doubles); CooldownLeft the time until it runs out, as read on the
	// snapshot's store clock when it was taken. Both 0 when closed.
	Cooldown     time.Duration
	CooldownLeft time.Duration
	Disabled     bool
}

// Snapshot returns every key with a state worth keeping (a generation
// above 0, an open entry, or a disable), sorted by key.
func (s *MemoryStore) Snapshot() MemorySnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make(map[string]struct{}, len(s.gens)+len(s.disabled))
	for k, g := range s.gens {
		if g > 0 {
			keys[k] = struct{}{}
		}
	}
	for k := range s.open {
		keys[k] = struct{}{}
	}
	for k := range s.disabled {
		keys[k] = struct{}{}
	}
	snap := MemorySnapshot{Entries: make([]SnapshotEntry, 0, len(keys))}
	for k := range keys {
		st := s.stateLocked(k)
		snap.Entries = append(snap.Entries, SnapshotEntry{
			Key: k, Generation: st.Generation, Open: st.Open,
			Cooldown: st.Cooldown, CooldownLeft: st.CooldownLeft, Disabled: st.Disabled,
		})
	}
	sort.Slice(snap.Entries, func(i, j int) bool { return snap.Entries[i].Key < snap.Entries[j].Key })
	return snap
}

// Validate reports the first entry that no MemoryStore could have
// produced: an empty or repeated key, an open entry at generation 0
// (every trip raises the generation), a negative duration, or a cooldown
// on a closed entry.
func (snap MemorySnapshot) Validate() error {
	seen := make(map[string]struct{}, len(snap.Entries))
	for i, e := range snap.Entries {
		switch {
		case e.Key == "":
			return fmt.Errorf("breaker snapshot: entry %d has no key", i)
		case e.Open && e.Generation == 0:
			return fmt.Errorf("breaker snapshot: %s is open at generation 0", e.Key)
		case e.Cooldown < 0 || e.CooldownLeft < 0:
			return fmt.Errorf("breaker snapshot: %s has a negative cooldown", e.Key)
		case !e.Open && (e.Cooldown != 0 || e.CooldownLeft != 0):
			return fmt.Errorf("breaker snapshot: %s is closed but has a cooldown", e.Key)
		}
		if _, dup := seen[e.Key]; dup {
			return fmt.Errorf("breaker snapshot: %s appears twice", e.Key)
		}
		seen[e.Key] = struct{}{}
	}
	return nil
}

// ErrSnapshotStale is wrapped by Restore's error for entries it skipped
// because the store already had a newer generation for them.
var ErrSnapshotStale = errors.New("store already past the snapshot's generation")

// Restore loads snap into the store, meant for a fresh one before any
// breaker reads it. An invalid snapshot (Validate) changes nothing. Each
// open entry's cooldown runs out CooldownLeft after now on the store's own
// clock. A generation is never lowered: a key the store already holds at
// a higher generation keeps its own state (its disable is still added),
// and Restore reports those keys in an error wrapping ErrSnapshotStale
// after restoring everything else.
func (s *MemoryStore) Restore(snap MemorySnapshot) error {
	if err := snap.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var stale []string
	for _, e := range snap.Entries {
		if e.Disabled {
			s.disabled[e.Key] = struct{}{}
		}
		cur := s.gens[e.Key]
		if cur > e.Generation {
			stale = append(stale, e.Key)
			continue
		}
		if e.Generation > 0 {
			s.gens[e.Key] = e.Generation
		}
		if e.Open {
			s.open[e.Key] = openEntry{gen: e.Generation, cooldown: e.Cooldown, until: now.Add(e.CooldownLeft)}
		} else {
			delete(s.open, e.Key)
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("breaker snapshot: %v kept: %w", stale, ErrSnapshotStale)
	}
	return nil
}
