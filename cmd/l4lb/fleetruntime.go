package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/fleet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// Drains and weights a fleet shares ([cluster] store = "redis"): the
// admin API's fleet-scope changes go to the fleet's store first and are
// then applied here (fleetRuntime, the admin.FleetRuntime), and every
// change another instance makes is applied here as the store tells of it
// (fleetFollower). pkg/pool says how the fleet's and this instance's own
// add up; pkg/fleet how the records survive an outage and an emptied
// Redis.

// fleetRuntime is admin.FleetRuntime on the fleet's store.
type fleetRuntime struct{ f *fleet.Store }

var _ admin.FleetRuntime = fleetRuntime{}

func backendKey(p *pool.Pool, b *pool.Backend) string { return p.Name + "/" + b.ID }

func (fr fleetRuntime) Drain(ctx context.Context, p *pool.Pool, b *pool.Backend, timeout time.Duration) error {
	d, err := fr.f.ShareDrain(ctx, backendKey(p, b), timeout)
	if err != nil {
		return err
	}
	return p.ApplyFleet(b, pool.Fleet{Drain: poolDrain(d), Here: true})
}

func (fr fleetRuntime) Undrain(ctx context.Context, p *pool.Pool, b *pool.Backend) error {
	d, err := fr.f.ShareUndrain(ctx, backendKey(p, b))
	if err != nil {
		return err
	}
	return p.ApplyFleet(b, pool.Fleet{Drain: poolDrain(d), Here: true})
}

func (fr fleetRuntime) SetWeight(ctx context.Context, p *pool.Pool, b *pool.Backend, w int) error {
	sw, err := fr.f.ShareWeight(ctx, backendKey(p, b), w, b.ConfiguredWeight())
	if err != nil {
		return err
	}
	return p.ApplyFleet(b, pool.Fleet{Weight: poolWeight(sw), Here: true})
}

// poolDrain and poolWeight are the store's records as the pool takes them.
func poolDrain(d fleet.SharedDrain) *pool.FleetDrain {
	fd := &pool.FleetDrain{Version: d.Version, Drained: d.Drained}
	if d.Drained {
		fd.Timeout, fd.Left = d.Timeout, time.Until(d.Deadline)
	}
	return fd
}

func poolWeight(w fleet.SharedWeight) *pool.FleetWeight {
	fw := &pool.FleetWeight{Version: w.Version}
	if w.Set {
		weight := w.Weight
		fw.Weight, fw.Configured = &weight, w.Configured
	}
	return fw
}

// fleetFollower applies the fleet's records to every backend served: it
// watches each backend's keys in the store (the server's invalidation of
// another instance's write, a reconnect, a flush or a rejoin calls the
// watcher) and reads again what changed, on a goroutine of its own (the
// watchers are called on the Redis client's).
type fleetFollower struct {
	f     *fleet.Store
	pools func() []*pool.Pool
	log   *slog.Logger

	mu      sync.Mutex
	watched map[string]func() // key -> stop its Watch
	closed  bool              // no watch after close
	dirty   map[string]struct{}
	kick    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// newFleetFollower makes the follower; start runs it.
func newFleetFollower(f *fleet.Store, pools func() []*pool.Pool, log *slog.Logger) *fleetFollower {
	return &fleetFollower{f: f, pools: pools, log: log, watched: map[string]func(){}, dirty: map[string]struct{}{},
		kick: make(chan struct{}, 1), stop: func() {}}
}

// start applies what the fleet holds for the backends of pools before it
// returns (so that the fleet's drains hold from the first client), then
// follows its changes on a goroutine of its own until close.
func (ff *fleetFollower) start(pools []*pool.Pool) {
	if ff == nil {
		return
	}
	ff.follow(pools)
	ctx, cancel := context.WithCancel(context.Background())
	ff.apply(ctx)
	ff.stop, ff.done = cancel, make(chan struct{})
	go ff.run(ctx)
}

// follow watches the keys of pools' backends (and no others), and has
// every one read again: a rebuild may have raced a change being applied
// to the backend it replaced. The reads go through the client-side cache,
// so a record that did not change costs Redis nothing.
func (ff *fleetFollower) follow(pools []*pool.Pool) {
	if ff == nil {
		return
	}
	keys := map[string]struct{}{}
	for _, p := range pools {
		for _, b := range p.Backends() {
			keys[backendKey(p, b)] = struct{}{}
		}
	}
	ff.mu.Lock()
	if ff.closed {
		ff.mu.Unlock()
		return
	}
	for k, stop := range ff.watched {
		if _, ok := keys[k]; !ok {
			stop()
			delete(ff.watched, k)
		}
	}
	for k := range keys {
		if ff.watched[k] == nil {
			ff.watched[k] = ff.f.Watch(k, func() { ff.changed(k) })
		}
		ff.dirty[k] = struct{}{}
	}
	ff.mu.Unlock()
	ff.poke()
}

// changed is a Watch callback: it must not block.
func (ff *fleetFollower) changed(key string) {
	ff.mu.Lock()
	ff.dirty[key] = struct{}{}
	ff.mu.Unlock()
	ff.poke()
}

func (ff *fleetFollower) poke() {
	select {
	case ff.kick <- struct{}{}:
	default:
	}
}

func (ff *fleetFollower) run(ctx context.Context) {
	defer close(ff.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ff.kick:
		}
		ff.apply(ctx)
	}
}

// apply reads every key marked and applies it to the backends served.
func (ff *fleetFollower) apply(ctx context.Context) {
	ff.mu.Lock()
	dirty := ff.dirty
	ff.dirty = map[string]struct{}{}
	ff.mu.Unlock()
	if len(dirty) == 0 {
		return
	}
	for _, p := range ff.pools() {
		for _, b := range p.Backends() {
			key := backendKey(p, b)
			if _, ok := dirty[key]; !ok {
				continue
			}
			sh, err := ff.f.ReadShared(ctx, key)
			if err == nil {
				err = p.ApplyFleet(b, pool.Fleet{Drain: poolDrain(sh.Drain), Weight: poolWeight(sh.Weight)})
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil { // the next change of the key reads it again
				ff.log.Warn("the fleet's drain and weight of a backend are not applied", "pool", p.Name, "backend", b.Addr, "error", err)
			}
		}
	}
}

// close stops following: no watcher is left, no read runs after it.
func (ff *fleetFollower) close() {
	if ff == nil {
		return
	}
	ff.stop()
	if ff.done != nil {
		<-ff.done
	}
	ff.mu.Lock()
	ff.closed = true
	for k, stop := range ff.watched {
		stop()
		delete(ff.watched, k)
	}
	ff.mu.Unlock()
}
