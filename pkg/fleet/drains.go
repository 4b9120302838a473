package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The drains and weights operators set for the whole fleet (the admin
// API's drain and weight without scope=local), one record of each per
// backend in Redis (drainsredis.go). The rules, those of the manual
// disables where a drain is concerned:
//
//   - A drain is always safe to spread, as a disable is: made while
//     Redis is out of reach it is kept here (pending) and merged back
//     when Redis answers again, drained winning (a record drained already
//     keeps its own deadline). An undrain (enable) and a weight need Redis:
//     apart they fail with ErrStoreDown, and nothing changes anywhere, for
//     neither has a direction that is safe to merge (a weight written back
//     could undo one another operator set meanwhile). The operator can
//     still make either this instance's own (scope=local).
//   - Reads answer the newest record known: Redis's, or this instance's
//     copy (every answer and every own write) when that is newer (Redis
//     lost it: the copy is written back) or when the Store is apart.
//   - The deadline of a drain is one moment on Redis's clock, so every
//     instance resets what is still open to the backend at once, however
//     late it heard of the drain; each turns it into its own clock from
//     the time left that Redis answers (no two clocks are compared).
//   - Changes travel by the breaker keys' path: the records sit in the
//     backend's hash tag, so the server's invalidation of either calls
//     the key's watchers (Watch), and a reconnect, a flush or a rejoin
//     calls every watcher; the caller then reads the key again.

// Shared is one backend's drain and weight as the fleet shares them.
type Shared struct {
	Drain  SharedDrain
	Weight SharedWeight
}

// SharedDrain is a backend's drain record. Version 0: none was ever made.
type SharedDrain struct {
	Version uint64
	Drained bool
	// Timeout is what the operator asked for; Deadline, on this
	// instance's clock, when the connections still open are reset.
	Timeout  time.Duration
	Deadline time.Time
}

// SharedWeight is a backend's weight record. Version 0: none was ever
// set; Set false: reset to the file's weight.
type SharedWeight struct {
	Version uint64
	Set     bool
	// Weight replaced Configured, the file's weight where it was set: an
	// instance whose file gives another weight keeps the file's (the
	// file's edit is the newer word, as at a restart).
	Weight, Configured int
}

// sharedState is what a Store knows of the shared records, under mu:
// the newest copy of each key, and the drains made while apart, not yet
// merged (by key: their local deadline and timeout).
type sharedState struct {
	mu      sync.Mutex
	copies  map[string]Shared
	pending map[string]SharedDrain
}

// learn keeps what Redis answered (or was just told) where it is newer
// than the copy, and answers the newest known, with which of Redis's
// two records are behind the copy.
func (ss *sharedState) learn(key string, got Shared) (newest Shared, drainBehind, weightBehind bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.copies == nil {
		ss.copies = map[string]Shared{}
	}
	cur := ss.copies[key]
	if got.Drain.Version > cur.Drain.Version {
		cur.Drain = got.Drain
	}
	if got.Weight.Version > cur.Weight.Version {
		cur.Weight = got.Weight
	}
	ss.copies[key] = cur
	return cur, got.Drain.Version < cur.Drain.Version, got.Weight.Version < cur.Weight.Version
}

// known is the copy, with a pending drain over it.
func (ss *sharedState) known(key string) Shared {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sh := ss.copies[key]
	if d, ok := ss.pending[key]; ok {
		d.Version = sh.Drain.Version
		sh.Drain = d
	}
	return sh
}

// toLocal turns a drain record read at Redis time now (ms) into this
// instance's clock; rawDrain is the other way, for a write-back.
func toLocal(d rawShared, now int64) SharedDrain {
	sd := SharedDrain{Version: d.version, Drained: d.set}
	if d.set {
		sd.Timeout = time.Duration(d.b) * time.Millisecond
		sd.Deadline = time.Now().Add(time.Duration(d.a-now) * time.Millisecond)
	}
	return sd
}

func weightOf(w rawShared) SharedWeight {
	sw := SharedWeight{Version: w.version, Set: w.set}
	if w.set {
		sw.Weight, sw.Configured = int(w.a), int(w.b)
	}
	return sw
}

// ReadShared is key's drain and weight: Redis's, or the copy when newer
// (Redis lost a record: it is written back) or when the Store is apart.
// Reads go through the client-side cache; a drained record this Store
// has no copy of costs one more round trip, for Redis's clock.
func (s *Store) ReadShared(ctx context.Context, key string) (Shared, error) {
	var drain, weight rawShared
	var now int64
	copied := s.shared.known(key).Drain
	ok, err := s.call(ctx, "shared_read", func(ctx context.Context, r *redisStore) (err error) {
		drain, weight, now, err = r.readShared(ctx, key, copied.Version)
		return err
	})
	if !ok {
		return s.shared.known(key), nil
	}
	if err != nil {
		return Shared{}, fmt.Errorf("drain and weight of %s: %w", key, err)
	}
	got := Shared{Drain: copied, Weight: weightOf(weight)}
	if drain.version != copied.Version {
		got.Drain = toLocal(drain, now)
	}
	newest, drainBehind, weightBehind := s.shared.learn(key, got)
	if drainBehind {
		s.restore(ctx, key, fieldDrain, rawDrain(newest.Drain))
	}
	if weightBehind {
		w := newest.Weight
		s.restore(ctx, key, fieldWeight, rawShared{version: w.Version, set: w.Set, a: int64(w.Weight), b: int64(w.Configured)})
	}
	return s.shared.known(key), nil
}

// rawDrain is a drain copy as restoreShared takes it: a, the time left.
func rawDrain(d SharedDrain) rawShared {
	raw := rawShared{version: d.Version, set: d.Drained}
	if d.Drained {
		raw.a, raw.b = max(0, time.Until(d.Deadline).Milliseconds()), d.Timeout.Milliseconds()
	}
	return raw
}

// restore writes a copy back where Redis lost it; what Redis holds after
// is learned. A failure is logged: the next read tries again.
func (s *Store) restore(ctx context.Context, key, field string, rec rawShared) {
	var got rawShared
	var now int64
	ok, err := s.call(ctx, "shared_write", func(ctx context.Context, r *redisStore) (err error) {
		got, now, err = r.restoreShared(ctx, key, field, rec)
		return err
	})
	if !ok || err != nil {
		s.log.Warn("cluster store: a drain or weight Redis lost is not written back yet", "key", key, "field", field, "error", err)
		return
	}
	s.log.Info("cluster store: wrote back a drain or weight Redis had lost", "key", key, "field", field, "version", rec.version)
	s.shared.learn(key, s.sharedOf(field, got, now))
}

// sharedOf is one record as a Shared with the other left at version 0.
func (s *Store) sharedOf(field string, rec rawShared, now int64) Shared {
	if field == fieldDrain {
		return Shared{Drain: toLocal(rec, now)}
	}
	return Shared{Weight: weightOf(rec)}
}

// ShareDrain drains key for the whole fleet: no new connection from now,
// those still open reset at timeout from now (on Redis's clock). Apart it
// is kept here and merged back when Redis answers; the answer then has
// the version of the last record known (the drain is not the fleet's
// yet: its merge gives it a newer one).
func (s *Store) ShareDrain(ctx context.Context, key string, timeout time.Duration) (SharedDrain, error) {
	if timeout < 0 {
		return SharedDrain{}, fmt.Errorf("drain of %s: timeout %v < 0", key, timeout)
	}
	for {
		floor := s.shared.known(key).Drain.Version
		var got rawShared
		var now int64
		ok, err := s.call(ctx, "shared_write", func(ctx context.Context, r *redisStore) (err error) {
			got, now, err = r.writeShared(ctx, key, fieldDrain, floor, true, timeout.Milliseconds(), timeout.Milliseconds())
			return err
		})
		if ok {
			if err != nil {
				return SharedDrain{}, fmt.Errorf("drain of %s: %w", key, err)
			}
			d := toLocal(got, now)
			s.shared.learn(key, Shared{Drain: d})
			return d, nil
		}
		if d, kept := s.keepDrain(key, timeout); kept {
			return d, nil
		}
	}
}

// keepDrain keeps a drain made while apart, to be merged back; kept is
// false when Redis came back meanwhile (the caller asks it instead).
func (s *Store) keepDrain(key string, timeout time.Duration) (SharedDrain, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up.Load() {
		return SharedDrain{}, false
	}
	d := SharedDrain{Version: s.shared.known(key).Drain.Version, Drained: true, Timeout: timeout, Deadline: time.Now().Add(timeout)}
	s.shared.mu.Lock()
	if s.shared.pending == nil {
		s.shared.pending = map[string]SharedDrain{}
	}
	s.shared.pending[key] = d
	s.shared.mu.Unlock()
	s.log.Info("cluster store unreachable: drain kept locally, to be merged back", "key", key, "timeout", timeout)
	return d, true
}

// ShareUndrain ends key's drain for the whole fleet. It needs Redis.
func (s *Store) ShareUndrain(ctx context.Context, key string) (SharedDrain, error) {
	rec, err := s.writeNeedingRedis(ctx, key, fieldDrain, false, 0, 0)
	return rec.Drain, err
}

// ShareWeight sets key's weight for the whole fleet, as replacing the
// file's weight configured; weight == configured resets it (every
// instance back to its file's). It needs Redis.
func (s *Store) ShareWeight(ctx context.Context, key string, weight, configured int) (SharedWeight, error) {
	if weight < 0 || configured < 0 {
		return SharedWeight{}, fmt.Errorf("weight of %s: %d replacing %d: weights are >= 0", key, weight, configured)
	}
	set := weight != configured
	if !set {
		weight, configured = 0, 0
	}
	rec, err := s.writeNeedingRedis(ctx, key, fieldWeight, set, int64(weight), int64(configured))
	return rec.Weight, err
}

// writeNeedingRedis writes a new version of one record, or fails with
// ErrStoreDown while apart.
func (s *Store) writeNeedingRedis(ctx context.Context, key, field string, set bool, a, b int64) (Shared, error) {
	cur := s.shared.known(key)
	floor := cur.Weight.Version
	if field == fieldDrain {
		floor = cur.Drain.Version
	}
	var got rawShared
	var now int64
	ok, err := s.call(ctx, "shared_write", func(ctx context.Context, r *redisStore) (err error) {
		got, now, err = r.writeShared(ctx, key, field, floor, set, a, b)
		return err
	})
	if !ok {
		return Shared{}, fmt.Errorf("%s of %s: %w: retry when it is back (l4lb_cluster_store_up 1), or make it this instance's only (scope=local)", field, key, ErrStoreDown)
	}
	if err != nil {
		return Shared{}, fmt.Errorf("%s of %s: %w", field, key, err)
	}
	sh := s.sharedOf(field, got, now)
	s.shared.learn(key, sh)
	return sh, nil
}

// mergeDrains writes back the drains made while apart (drained wins). It
// runs in rejoin with s.mu held, before Redis decides again; on an error
// Redis is out of reach again, and what is left is merged at the next try.
func (s *Store) mergeDrains(ctx context.Context, r *redisStore) error {
	s.shared.mu.Lock()
	pending := make(map[string]SharedDrain, len(s.shared.pending))
	for k, d := range s.shared.pending {
		pending[k] = d
	}
	s.shared.mu.Unlock()
	for key, d := range pending {
		floor := s.shared.known(key).Drain.Version
		var got rawShared
		var now int64
		err := s.rejoinOp(ctx, "merge", func(ctx context.Context) (err error) {
			got, now, err = r.mergeDrain(ctx, key, floor, time.Until(d.Deadline), d.Timeout)
			return err
		})
		if err != nil && unreachable(err) {
			return err
		}
		s.shared.mu.Lock()
		delete(s.shared.pending, key)
		s.shared.mu.Unlock()
		if err != nil {
			s.log.Error("cluster store: a drain made while apart cannot be merged: the key in Redis is unusable", "key", key, "error", err)
			continue
		}
		s.log.Info("cluster store: merged a drain made while apart", "key", key, "version", got.version)
		s.shared.learn(key, Shared{Drain: toLocal(got, now)})
		s.reconciled.Add(1)
	}
	return nil
}
