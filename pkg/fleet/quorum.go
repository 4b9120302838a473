package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// The trip quorum (Config.TripQuorum, docs/breaker.md "Trip quorum"): a
// backend is out for the fleet only once that many instances have tripped
// it within its failure window. Each trip is the instance's vote, in one
// script (voteScript) that adds it and opens the breaker when the count is
// reached; an instance below the quorum opens its breaker for itself alone
// (breaker.Quorum). Votes are instance names, so that the breakers a reload
// replaces vote as one, scored by the Redis server's clock, the only clock
// that ever reads them.

var _ breaker.Quorum = (*Store)(nil)

// voter names this instance's vote: Config.Instance, or a random name for
// a Store built without one.
func voter(cfg Config) string {
	if cfg.Voter != "" {
		return cfg.Voter
	}
	if cfg.Instance != "" {
		return cfg.Instance
	}
	var buf [8]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "anonymous-" + hex.EncodeToString(buf[:])
}

// vote is voteScript for instance voter with quorum q.
func (r *redisStore) vote(ctx context.Context, key string, seen uint64, cooldown, ttl, window time.Duration, q int, voter string) (st breaker.State, tripped, voted bool, err error) {
	defer r.wrote(key)
	st, code, err := decodeStateCode(voteScript.Exec(ctx, r.client, r.ks.voting(key), []string{
		strconv.FormatUint(seen, 10), ms(cooldown), ms(ttl), strconv.Itoa(q), strconv.FormatInt(max(window.Milliseconds(), 1), 10), voter,
	}))
	return st, code == 1, code == 2, err
}

// unvote withdraws voter's vote on key.
func (r *redisStore) unvote(ctx context.Context, key, voter string) error {
	return r.client.Do(ctx, r.client.B().Zrem().Key(r.ks.key(key, fieldVotes)).Member(voter).Build()).Error()
}

// Vote implements breaker.Quorum. With a quorum of 1 it is Trip, to the
// command. While Redis is out of reach no vote can be counted: a closed
// breaker at generation seen answers voted, and this instance protects its
// own dials without deciding for the others, so nothing is marked for the
// merge, which would spread the open to the whole fleet (open wins). The
// vote is not kept for later either: its time would be this machine's
// clock; the next failed probe of the local open votes again.
func (s *Store) Vote(ctx context.Context, key string, seen uint64, cooldown, ttl, window time.Duration) (st breaker.State, tripped, voted bool, err error) {
	if s.cfg.TripQuorum <= 1 {
		st, tripped, err = s.Trip(ctx, key, seen, cooldown, ttl)
		return st, tripped, false, err
	}
	for {
		at := s.seq.Add(1)
		ok, err := s.call(ctx, "trip", func(ctx context.Context, r *redisStore) (err error) {
			st, tripped, voted, err = r.vote(ctx, key, seen, cooldown, ttl, window, s.cfg.TripQuorum, s.voter)
			return err
		})
		s.forget(key) // the vote that makes the quorum writes the open entry
		if ok {
			if err == nil {
				s.mirror(key, st, at)
			}
			return st, tripped, voted, err
		}
		retry, err := s.decideLocally(key, func() (bool, error) {
			var err error
			st, err = s.local.Read(ctx, key)
			voted = err == nil && !st.Open && st.Generation == seen
			return false, err
		})
		if !retry {
			return st, false, voted, err
		}
	}
}

// Unvote implements breaker.Quorum: this instance's local open closed. An
// instance apart from Redis has no vote there to withdraw that it could
// reach; one it cast before the outage ages out within its window.
func (s *Store) Unvote(ctx context.Context, key string) error {
	if s.cfg.TripQuorum <= 1 {
		return nil
	}
	_, err := s.call(ctx, "unvote", func(ctx context.Context, r *redisStore) error {
		return r.unvote(ctx, key, s.voter)
	})
	return err
}
