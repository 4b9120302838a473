package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// rejoinEvery is how often an instance apart from Redis tries it again.
const rejoinEvery = 500 * time.Millisecond

// Run checks Redis every SyncInterval while it answers (and at once when
// the client reconnected), and while it does not tries it every half
// second (or SyncInterval, if shorter), merging what was decided locally
// meanwhile before any decision is Redis's again. It also re-reads the
// membership documents the server invalidated and calls their watchers
// (syncMembers). It returns when ctx is done, after closing the client.
func (s *Store) Run(ctx context.Context) {
	defer s.Shutdown()
	timer, tick := s.clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.members.kick:
			s.syncMembers(ctx)
			continue
		case <-tick:
		case <-s.kick:
		}
		if s.up.Load() {
			s.check(ctx)
		} else if err := s.rejoin(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("cluster store still unreachable", "error", err)
		}
		next := s.cfg.SyncInterval
		if !s.up.Load() {
			next = min(next, rejoinEvery)
		}
		timer.Reset(next)
	}
}

// errDataLost is why the Store leaves Redis when the fleet's marker key is
// gone: the local copies must be merged back before Redis decides again.
var errDataLost = errors.New("the store lost the fleet's state (a restart without persistence, a flush or a failover to an empty replica): merging local copies back")

// mark sets the fleet's marker if it is absent and reports which copy of
// the fleet's data Redis holds (got) and whether Redis lost the fleet's
// data since this instance last looked: the marker was gone (this call set
// it), or it is another one than the instance saw last. The second is how
// every instance learns of a loss, not only the first to look after it:
// the others find the marker set again already (an instance apart while
// Redis restarted empty finds it so when it rejoins), and their local
// copies must be written back all the same, or a breaker whose generation
// Redis lost would wait for one it will never reach. The caller records
// got (s.epoch) once it has acted on the loss, so that an epoch equal to
// Redis's marker on a Store that is up means the loss is behind it.
func (s *Store) mark(ctx context.Context, r *redisStore) (got string, lost bool, err error) {
	var buf [12]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
	token := hex.EncodeToString(buf[:])
	got, err = r.mark(ctx, token)
	if err != nil {
		return "", false, err
	}
	prev, _ := s.epoch.Load().(string)
	return got, got == token || (prev != "" && prev != got), nil
}

// check is the health ping while up: one look at the fleet's marker, which
// also tells whether Redis still has the fleet's data.
func (s *Store) check(ctx context.Context) {
	var epoch string
	var fresh bool
	ok, err := s.call(ctx, "ping", func(ctx context.Context, r *redisStore) (err error) {
		epoch, fresh, err = s.mark(ctx, r)
		return err
	})
	if !ok || err != nil {
		return
	}
	if fresh {
		s.resync.Store(true)
		s.lost("ping", errDataLost)
	}
	s.epoch.Store(epoch)
}

// Shutdown closes the Redis client; the Store then decides locally.
func (s *Store) Shutdown() {
	s.up.Store(false)
	if r := s.remote.Swap(nil); r != nil {
		r.client.Close()
		if r.locks != nil {
			r.locks.Close()
		}
	}
}

// Probe locks at a rejoin are made what they would be had this instance
// never left, in two steps around the merge (rejoin). A release deletes
// only its owner's token, and a lock another instance took in Redis
// meanwhile stays: its probe and this one have both run since the
// outage, and whichever ends first moves the generation. Both run with
// s.mu held; on an error Redis is still out of reach and what is left is
// handed over at the next try.

// takeRunningProbes takes in Redis every lock taken on the local copy
// whose probe may still run, for the time it has left, so that no other
// instance starts a probe of the same backend meanwhile. It comes before
// the merge, which may show other instances the breaker these probes are
// for. A probe begun apart after an earlier one of the same backend
// ended apart shares that one's owner token, and Redis may still hold
// the earlier one's lock: it is retaken for the running probe, and the
// release owed for it is no longer made (it would drop the running
// probe's lock).
func (s *Store) takeRunningProbes(ctx context.Context, r *redisStore) error {
	now := time.Now()
	for id, until := range s.probes {
		if left := until.Sub(now); left > 0 {
			_, owed := s.owed[id]
			var got bool
			err := s.rejoinOp(ctx, "acquire_probe", func(ctx context.Context) (err error) {
				if owed {
					got, err = r.retakeProbe(ctx, id.key, id.owner, left)
				} else {
					got, err = r.AcquireProbe(ctx, id.key, id.owner, left)
				}
				return err
			})
			if err != nil && unreachable(err) {
				return err
			}
			if err == nil && !got {
				s.log.Info("cluster store: another instance holds the probe lock of a backend probed here since the outage: both probes run until one ends", "key", id.key)
			}
			if err == nil && owed {
				delete(s.owed, id)
			}
		}
		delete(s.probes, id)
	}
	return nil
}

// releaseOwedProbes makes the releases of probes that ended while apart.
// It comes after the merge: a probe that ended apart moved its breaker
// (closed it, or opened it again at a new generation) on the local copy
// only, and a lock gone from Redis before that move is merged would let
// another instance probe the generation this probe already judged.
func (s *Store) releaseOwedProbes(ctx context.Context, r *redisStore) error {
	for id := range s.owed {
		err := s.rejoinOp(ctx, "release_probe", func(ctx context.Context) error {
			return r.ReleaseProbe(ctx, id.key, id.owner)
		})
		if err != nil && unreachable(err) {
			return err
		}
		delete(s.owed, id)
	}
	return nil
}

// rejoinOp runs op on Redis for rejoin, bounded by the timeout.
func (s *Store) rejoinOp(ctx context.Context, name string, op func(context.Context) error) error {
	octx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := op(octx)
	s.observe(name, time.Since(start), err)
	return err
}

// rejoin connects if need be, marks the fleet's data, merges every key
// decided on locally (and every key, if Redis lost its data), and only then
// lets Redis decide again. On an error the Store stays apart for the next
// try; keys merged so far stay merged.
func (s *Store) rejoin(ctx context.Context) error {
	if err := s.connect(); err != nil {
		return err
	}
	r := s.remote.Load()
	if r == nil {
		return errors.New("cluster store shut down")
	}
	mctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	start := time.Now()
	epoch, fresh, err := s.mark(mctx, r)
	cancel()
	s.observe("ping", time.Since(start), err)
	if err != nil {
		return err
	}
	if fresh {
		s.resync.Store(true)
	}
	s.epoch.Store(epoch)
	s.mu.Lock()
	lost := s.resync.Load()
	merged := 0
	err = s.takeRunningProbes(ctx, r)
	if err == nil {
		merged, err = s.reconcile(ctx, r, lost)
	}
	if err == nil {
		err = s.mergeDrains(ctx, r) // drains.go
	}
	if err == nil {
		err = s.releaseOwedProbes(ctx, r)
	}
	if err == nil {
		s.resync.Store(false)
		s.up.Store(true)
		s.synced()
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("merge after %d keys: %w", merged, err)
	}
	s.log.Info("cluster store reachable: decisions are the fleet's", "merged_keys", merged, "store_was_empty", lost)
	s.forgetAll()
	s.notifyAll()
	// What changed while apart, and what Redis lost, is found by reading
	// every membership document again.
	s.members.markAll()
	s.members.poke()
	return nil
}
