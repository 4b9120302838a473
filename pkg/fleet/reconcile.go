package fleet

import (
	"context"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// reconcile writes back every key this instance decided on alone while
// Redis was out of reach, by one rule that never closes a breaker on stale
// evidence:
//
//   - The key's generation becomes one above both the local and the Redis
//     one. Every dial in flight on any instance captured a lower one, so
//     none of their results can close anything after the merge (they are
//     stale, rule 2), and neither side's snapshot is ever rolled back.
//   - Open wins. A local trip (or re-open) is written back unless Redis is
//     open already, in which case Redis keeps its own cooldown. A local
//     close is re-checked: it stands only if Redis is closed too; an open
//     entry in Redis stays open, and the next probe decides for the fleet.
//   - A local disable is added; an enable is never made while apart
//     (Store.Enable refuses), so none is merged. A key only disabled
//     while apart merges no open entry of the local copy's: that is a
//     mirror of Redis from before the outage, not a local decision.
//
// When Redis has lost its data (lost true: the fleet's marker key was
// gone, or set again since this instance saw it), every key the local copy
// knows is written back by the same rule where Redis is now behind it, so
// no instance is left holding a breaker open at a generation Redis will
// never reach.
//
// A key Redis refuses to merge with an error that is no outage (it holds
// what no instance writes: WRONGTYPE) is logged and left as Redis holds
// it, so that one unusable key does not keep the instance apart.
//
// It runs with s.mu held, so no local decision races it, and returns how
// many keys it merged before an error.
func (s *Store) reconcile(ctx context.Context, r *redisStore, lost bool) (int, error) {
	var keys []string
	for key := range s.apart {
		keys = append(keys, key)
	}
	if lost {
		for _, e := range s.local.Snapshot().Entries {
			if _, apart := s.apart[e.Key]; !apart {
				keys = append(keys, e.Key)
			}
		}
	}
	merged := 0
	for _, key := range keys {
		decided, apart := s.apart[key]
		local, err := s.local.Read(ctx, key)
		if err != nil {
			return merged, err
		}
		if apart && !decided && !lost {
			// Only a disable was made here: the local open entry (or
			// its absence) is a mirror of Redis from before the
			// outage, no evidence of this instance's own.
			local.Open, local.Cooldown, local.CooldownLeft = false, 0, 0
		}
		var st breaker.State
		var changed bool
		mode := mergeLost
		if apart {
			mode = mergeApart
		}
		err = s.rejoinOp(ctx, "merge", func(ctx context.Context) (err error) {
			st, changed, err = r.merge(ctx, key, local, mode)
			return err
		})
		if err != nil && unreachable(err) {
			return merged, err
		}
		if err != nil {
			// Redis refuses this key (it holds what no instance
			// writes): staying apart for it would keep every other key
			// from the fleet, for as long as the key stays as it is.
			s.log.Error("cluster store: a breaker state decided while apart cannot be merged: the key in Redis is unusable", "key", key, "error", err)
			delete(s.apart, key)
			continue
		}
		if changed {
			s.log.Info("cluster store: merged a breaker state", "key", key, "decided_locally", apart,
				"local_generation", local.Generation, "local_open", local.Open,
				"generation", st.Generation, "open", st.Open)
			merged++
			s.reconciled.Add(1)
		}
		s.mirrorLocked(key, st, s.seq.Add(1))
		delete(s.apart, key)
	}
	return merged, nil
}

// catchUp writes key's local copy back when Redis answered st, a
// generation below the one this instance holds: Redis lost the key while
// keeping the fleet's marker, so no marker check tells. A failover to a
// replica the key's last writes had not reached does this (replication is
// asynchronous), and so does, on a Redis Cluster, the failover of any
// slot but the marker's. Generations never go down in Redis otherwise, so
// once a read from the server itself confirms it, the key is merged back
// by the reconcile rule as after a loss (open wins, the generation raised
// above both sides); an instance is never left holding a breaker open at
// a generation Redis will never reach. It returns what Redis holds after
// it, or st when it could not tell, and lost: Redis was behind the copy
// (what an operation asked of the key is then moot), not merely a read
// crossing a newer one.
//
// No Redis call is made under s.mu: catchUp runs when Redis is slow or
// failing over, and every other key's answers wait for s.mu. What the
// lock ordered still holds without it. A key decided here while apart is
// the rejoin's to merge: it is checked before each call, and mirror
// leaves it alone after. The answers go to the local copy by mirror,
// ordered by the s.seq number taken before each call, as every other
// answer is. One catchUp of a key runs at a time here (s.catching): a
// second caller returns the answer it was given (Redis's, behind, with
// lost false), which the breaker's reader refuses as older than what it
// holds. And the merge writes only where Redis's generation is still
// below the copy's (mergeBehind), one script at a time, so a merge that
// crossed another (another instance's catchUp, the rejoin's) finds Redis
// caught up and changes nothing: not even the disable, so an operator's
// enable made after the first merge stands.
func (s *Store) catchUp(ctx context.Context, key string, st breaker.State) (_ breaker.State, lost bool) {
	local, err := s.local.Read(ctx, key)
	if err != nil || st.Generation >= local.Generation || !s.beginCatchUp(key) {
		return st, false
	}
	defer s.endCatchUp(key)
	// The answer may be older than the one the local copy took (two calls
	// crossing, a cached read): the server's own answer, to a read begun
	// now, says whether Redis is behind.
	var fresh breaker.State
	at := s.seq.Add(1)
	if ok, err := s.call(ctx, "read", func(ctx context.Context, r *redisStore) (err error) {
		fresh, err = r.readFresh(ctx, key)
		return err
	}); !ok || err != nil {
		return st, false
	}
	if fresh.Generation >= local.Generation {
		s.mirror(key, fresh, at)
		return fresh, false
	}
	// What the copy holds now: answers mirrored during the read (an
	// operator's enable) are part of what is written back.
	if local, err = s.local.Read(ctx, key); err != nil || s.isApart(key) {
		return st, false
	}
	var merged breaker.State
	var changed bool
	at = s.seq.Add(1)
	if ok, err := s.call(ctx, "merge", func(ctx context.Context, r *redisStore) (err error) {
		merged, changed, err = r.merge(ctx, key, local, mergeBehind)
		return err
	}); !ok || err != nil {
		return st, false // behind, but not written back: the next read tries again
	}
	if changed {
		s.log.Warn("cluster store: redis lost a breaker state (a failover to a replica the last writes had not reached): merged the local copy back", "key", key,
			"local_generation", local.Generation, "local_open", local.Open, "redis_generation", fresh.Generation,
			"generation", merged.Generation, "open", merged.Open)
		s.reconciled.Add(1)
	}
	s.mirror(key, merged, at)
	return merged, true
}

// beginCatchUp takes key for a catchUp, unless one is under way or the
// key was decided on here while apart (the rejoin's to merge).
func (s *Store) beginCatchUp(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, apart := s.apart[key]
	_, busy := s.catching[key]
	if apart || busy {
		return false
	}
	s.catching[key] = struct{}{}
	return true
}

func (s *Store) endCatchUp(key string) {
	s.mu.Lock()
	delete(s.catching, key)
	s.mu.Unlock()
}

// isApart reports whether key was decided on here while apart and is not
// merged back yet.
func (s *Store) isApart(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, apart := s.apart[key]
	return apart
}
