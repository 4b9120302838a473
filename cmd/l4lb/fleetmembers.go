package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/fleet"
	"github.com/l4lb/l4lb/pkg/membership"
)

// The API's additions in a fleet ([cluster] store = "redis"): the fleet
// store holds each pool's list as one versioned record; an operator's
// change is written there, conditional on the record it was made on,
// before this instance serves it, and every instance follows the records
// the others write.

// fleetChangeTries bounds how many times an operator's change is made
// again after the fleet store refused it because another instance changed
// the pool meanwhile: each try starts from that instance's change, after
// a random pause of up to 2^try ms (at most about 0.25 s in all), so only
// a pool changed through other instances nonstop runs out.
const fleetChangeTries = 8

// againOnFleetChange runs change; when the fleet store refused it because
// another instance changed the pool's backends meanwhile
// (fleet.ErrMembersChanged), it reads the fleet's record of the pool
// again and makes the change anew on it, up to fleetChangeTries times
// (then 409).
func (in *instance) againOnFleetChange(pool string, change func() error) error {
	var err error
	for try := range fleetChangeTries {
		if err = change(); !errors.Is(err, fleet.ErrMembersChanged) {
			return err
		}
		if in.readFleet(pool) {
			in.discovery.changed()
		}
		// Apart, at random and longer each time: two instances that
		// collided would otherwise collide again at once.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Millisecond) << try)))
	}
	return statusError{err: fmt.Errorf("pool %q: other instances changed its backends %d times while this change was made; try again: %w", pool, fleetChangeTries, err), status: admin.ErrRefused}
}

// shared makes ch, an operator's change of pool, one the fleet
// ([cluster] store = "redis") shares: the fleet store takes it before it
// is served here, and every instance follows it (followFleet). When the
// store cannot take it, it is made nowhere (the API answers 503); when
// this instance then cannot serve it, the store gets the pool's previous
// backends back.
func (in *instance) shared(ctx context.Context, pool string, ch memberChange) memberChange {
	f := in.store.fleet
	if f == nil {
		return ch
	}
	var before []byte
	var applied, written uint64
	ch.commit = func() error {
		// Under the bases' lock, so that no record of another instance's
		// is applied between the list read here and its write.
		fb := &in.fleetBases
		fb.mu.Lock()
		defer fb.mu.Unlock()
		if fb.applied[pool] != applied {
			// Another instance's change replaced the list this one was
			// made on: written, it would undo that change.
			return fmt.Errorf("the fleet store did not take the change: %w", fleet.ErrMembersChanged)
		}
		doc, err := json.Marshal(in.members.AddedBackends()[pool])
		if err == nil {
			written, err = f.PutMembers(ctx, pool, doc, fb.version[pool])
		}
		if errors.Is(err, fleet.ErrMembersUnreadable) {
			return statusError{err: fmt.Errorf("no instance makes the change: %w; every instance keeps serving the backends it last read; "+
				"POST /api/v1/pools/%s/fleet-members/replace (l4lb ctl fleet-replace %s) writes this instance's over the record", err, pool, pool), status: admin.ErrUnreadable}
		}
		if err != nil {
			return fmt.Errorf("the fleet store did not take the change, so no instance makes it: %w", err)
		}
		fb.hold(pool, written)
		return nil
	}
	apply := ch.apply
	ch.apply = func(file *config.Config) (func(), error) {
		in.fleetBases.mu.Lock()
		applied = in.fleetBases.applied[pool]
		in.fleetBases.mu.Unlock()
		before, _ = json.Marshal(in.members.AddedBackends()[pool])
		return apply(file)
	}
	// After a failed change the members take the fleet's record again:
	// the undo restored what this change took out of the list as it was
	// then, on top of whatever record was applied meanwhile, and a write
	// whose answer was lost may have reached Redis all the same. Held
	// otherwise, the difference would be written to the whole fleet with
	// the next change.
	ch.resync = func() {
		if in.readFleet(pool) {
			in.discovery.changed()
		}
	}
	ch.revert = func() {
		v, err := f.PutMembers(context.Background(), pool, before, written)
		if err != nil {
			in.log.Error("membership: a change this instance could not serve stays in the fleet store", "pool", pool, "error", err)
			return
		}
		in.fleetBases.mu.Lock()
		in.fleetBases.hold(pool, v)
		in.fleetBases.mu.Unlock()
	}
	return ch
}

// fleetBases is, per pool, the version of the fleet's record of API
// additions that the members here hold (the base of a change made on
// them, fleet.PutMembers), and how many records from other instances were
// applied to them, so that a change whose list such a record replaced
// while it was made is made again rather than written.
type fleetBases struct {
	mu      sync.Mutex
	version map[string]uint64
	applied map[string]uint64
}

// hold records that the members hold pool's record at version v (fb.mu
// held).
func (fb *fleetBases) hold(pool string, v uint64) {
	if fb.version == nil {
		fb.version, fb.applied = map[string]uint64{}, map[string]uint64{}
	}
	fb.version[pool] = max(fb.version[pool], v)
}

// readFleet takes the fleet's record of pool's API additions into the
// members; it reports whether that changed them. Of a record this build
// cannot read, it takes the store's last good copy (which the store read
// before this did): the base of the next change is then the one the
// store holds, so that change fails as unreadable (502), not as made on
// an older record (409 after every try). A pool a reload brings
// back has its record again, which settling on the file without it had
// dropped here (no instance's change announced it since).
func (in *instance) readFleet(pool string) bool {
	f := in.store.fleet
	if f == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	doc, v, err := f.MembersAt(ctx, pool)
	unreadable := errors.Is(err, fleet.ErrMembersUnreadable) // the store logs it, once per record
	if unreadable && v == 0 {
		return false // no copy the store serves: the pool keeps its own
	}
	if err != nil && !unreadable {
		in.log.Warn("membership: the fleet's backends of a pool could not be read; the pool keeps its own", "pool", pool, "error", err)
		return false
	}
	list, err := decodeFleetMembers(doc)
	if err != nil { // the store judged it readable (checkFleetMembers): a copy of its own
		in.log.Warn("membership: the fleet's record of a pool's backends is not readable; the pool keeps its own", "pool", pool, "error", err)
		return false
	}
	fb := &in.fleetBases
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if v < fb.version[pool] {
		return false // a read that crossed this instance's own newer write
	}
	changed := in.members.SetAdded(pool, list)
	fb.hold(pool, v)
	if changed {
		fb.applied[pool]++
	}
	return changed
}

// followFleet keeps the API's additions as the fleet store has them:
// another instance's add or remove reaches this one's pools. It returns
// the stop; nothing without a fleet.
func (in *instance) followFleet() (stop func()) {
	f := in.store.fleet
	if f == nil {
		return func() {}
	}
	return f.WatchMembers(func(pool string) {
		if in.readFleet(pool) {
			in.discovery.changed()
		}
	})
}

// decodeFleetMembers reads a pool's record of API additions as the fleet
// store holds it (nil or empty: none). It is the store's CheckMembers
// too, so a record it cannot read is the store's unreadable one
// (fleet.ErrMembersUnreadable), which no change is made on.
func decodeFleetMembers(doc []byte) ([]membership.Added, error) {
	var list []membership.Added
	if len(doc) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		return nil, fmt.Errorf("not a JSON list of backends: %w", err)
	}
	return list, nil
}

func checkFleetMembers(doc []byte) error {
	_, err := decodeFleetMembers(doc)
	return err
}

// ReplaceUnreadable implements admin.FleetMembership: the way out of a
// record of pool's API additions that this build cannot read, which every
// change fails on (502). It writes the list this instance serves over
// that record, and only over it, so a record another instance wrote
// meanwhile is kept; every instance then follows it.
func (m apiMembers) ReplaceUnreadable(ctx context.Context, pool string) error {
	in := m.in
	f := in.store.fleet
	if f == nil {
		return fmt.Errorf("%w: this instance is in no fleet ([cluster] store is not \"redis\")", admin.ErrNothingToReplace)
	}
	return in.config.HoldActions(func() error {
		// Under the bases' lock, as a change's write is (shared).
		fb := &in.fleetBases
		fb.mu.Lock()
		defer fb.mu.Unlock()
		doc, err := json.Marshal(in.members.AddedBackends()[pool])
		if err != nil {
			return err
		}
		v, err := f.ReplaceUnreadableMembers(ctx, pool, doc)
		switch {
		case errors.Is(err, fleet.ErrMembersReadable):
			return statusError{err: err, status: admin.ErrNothingToReplace}
		case errors.Is(err, fleet.ErrMembersChanged):
			return statusError{err: err, status: admin.ErrRefused}
		case err != nil:
			return err
		}
		fb.hold(pool, v)
		return nil
	})
}
