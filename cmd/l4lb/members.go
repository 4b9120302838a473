package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/discovery"
	"github.com/l4lb/l4lb/pkg/membership"
)

// Backends that come and go at run time: DNS discovery's watchers and the
// admin API's additions (pkg/membership says how they combine with the
// file). Every change is applied as a reload applies a file, from the
// file last loaded: the pools are rebuilt aside, carrying every backend
// that stays (its breaker, health, drain, weight and connections), and
// swapped in while serving.

// firstLookupWait bounds how long start waits for the first answer of
// every pool's discovery: a resolver that does not answer leaves the pool
// empty until it does, rather than holding up the start.
const firstLookupWait = 5 * time.Second

// discoveries runs a Watcher per pool with [pool.NAME.discovery], and one
// goroutine that serves what they found: a watcher never waits for a
// rebuild (a reload stops watchers while it holds the reload lock).
type discoveries struct {
	in      *instance
	metrics *discovery.Metrics
	mu      sync.Mutex
	pools   map[string]*poolWatch
	closed  bool
	// handed is each pool's discovered set an upgrade's old process
	// handed over, for the pool's first watcher to start from.
	handed map[string][]config.Backend
	// kick asks the applier to serve the discovered sets as they are now.
	kick       chan struct{}
	stopApply  context.CancelFunc
	applierEnd chan struct{}
}

// poolWatch is one pool's running watcher.
type poolWatch struct {
	spec   config.Discovery
	w      *discovery.Watcher
	cancel context.CancelFunc
	done   chan struct{}
	first  chan struct{} // closed at its first report
}

func newDiscoveries(in *instance) *discoveries {
	m, _ := discovery.NewMetrics(nil) // registered by the admin endpoint
	ctx, cancel := context.WithCancel(context.Background())
	ds := &discoveries{in: in, metrics: m, pools: map[string]*poolWatch{},
		kick: make(chan struct{}, 1), stopApply: cancel, applierEnd: make(chan struct{})}
	go ds.applier(ctx)
	return ds
}

// refusedRetry is how soon sets whose change was refused (an upgrade
// under way) are served again: the new process serves, or the attempt
// fails and this one acts again, within moments.
const refusedRetry = 200 * time.Millisecond

// failedRetry is how soon sets that could not be served are tried again.
const failedRetry = time.Second

// applier serves the discovered sets each time it is kicked, once the
// pools are built (before, start serves what the first answers say). A
// change refused while an upgrade is under way is tried again until it
// is served or this process stops: the watcher reports a set once, so a
// change not retried would wait for the next one.
func (ds *discoveries) applier(ctx context.Context) {
	defer close(ds.applierEnd)
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-ds.kick:
		case <-retry:
		}
		retry = nil
		if !ds.in.started.Load() {
			continue
		}
		switch err := ds.in.applyDiscovered(); {
		case err == nil || ds.in.stopping.Load():
		case errors.Is(err, admin.ErrRefused), errors.Is(err, errStopping):
			retry = time.After(refusedRetry)
		default: // the sets cannot be built: try again, a newer set may replace them
			retry = time.After(failedRetry)
		}
	}
}

// changed asks the applier to serve the sets as they are now.
func (ds *discoveries) changed() {
	select {
	case ds.kick <- struct{}{}:
	default: // one is pending: it will read the latest sets
	}
}

// follow makes the running watchers those cfg's pools ask for: new ones
// start, changed ones restart, dropped ones stop (their pools' discovered
// backends go with them: membership.Set.Settle).
func (ds *discoveries) follow(cfg *config.Config) []*poolWatch {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.closed {
		return nil
	}
	var started []*poolWatch
	for name, pw := range ds.pools {
		p, ok := cfg.Pools[name]
		if ok && p.Discovery != nil && sameSpec(*p.Discovery, pw.spec) {
			continue
		}
		pw.stop()
		delete(ds.pools, name)
		if !ok || p.Discovery == nil {
			// Gone, or no longer discovering. A pool whose discovery
			// changed keeps its series: its new watcher counts on, and no
			// counter goes back to 0.
			ds.metrics.Forget(name)
		}
	}
	for _, name := range cfg.PoolNames {
		p := cfg.Pools[name]
		if p.Discovery == nil || ds.pools[name] != nil {
			continue
		}
		pw, err := ds.start(name, *p.Discovery)
		if err != nil {
			ds.in.log.Error("discovery not started", "pool", name, "error", err)
			ds.metrics.Forget(name) // no watcher keeps its series now
			continue
		}
		ds.pools[name] = pw
		started = append(started, pw)
	}
	return started
}

// startFrom has the first watcher of each pool start from the set an
// upgrade's old process handed over (before the first follow): a first
// lookup that fails then keeps that set, as it would have in the old
// process, rather than emptying the pool.
func (ds *discoveries) startFrom(sets map[string][]config.Backend) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.handed = sets
}

// under ds.mu
func (ds *discoveries) start(name string, d config.Discovery) (*poolWatch, error) {
	pw := &poolWatch{spec: d, done: make(chan struct{}), first: make(chan struct{})}
	var once sync.Once
	initial := watcherSet(ds.handed[name])
	delete(ds.handed, name)
	w, err := discovery.NewWatcher(discovery.Spec{
		DNS: d.DNS, SRV: d.SRV, Resolvers: d.Resolvers, MinRefresh: d.MinRefresh, MaxRefresh: d.MaxRefresh,
		EmptyGrace: d.EmptyGrace, Family: d.Family, Timeout: d.Timeout,
	}, discovery.Options{Pool: name, Log: ds.in.log, Metrics: ds.metrics, Initial: initial, OnChange: func(s discovery.Set) {
		ds.in.discovered(name, d, s)
		once.Do(func() { close(pw.first) })
	}})
	if err != nil {
		return nil, err
	}
	pw.w = w
	ctx, cancel := context.WithCancel(context.Background())
	pw.cancel = cancel
	go func() {
		defer close(pw.done)
		w.Run(ctx)
	}()
	return pw, nil
}

// status is pool name's DNS discovery for the admin API's pools JSON; nil
// for a pool without one.
func (ds *discoveries) status(name string) *admin.DiscoveryJSON {
	ds.mu.Lock()
	pw := ds.pools[name]
	ds.mu.Unlock()
	if pw == nil {
		return nil
	}
	st := pw.w.Status()
	v := &admin.DiscoveryJSON{Type: "dns", Name: pw.spec.DNS, Backends: st.Backends,
		LastSuccess: timeOrNil(st.LastSuccess), Failing: st.Failing, LastError: st.LastError,
		EmptySince: timeOrNil(st.EmptySince)}
	if pw.spec.SRV != "" {
		v.Type, v.Name = "srv", pw.spec.SRV
	}
	if st.Failing {
		v.FailingSince = timeOrNil(st.FailingSince)
	}
	return v
}

// timeOrNil is t, or nil for the zero time (absent from the JSON).
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (pw *poolWatch) stop() {
	pw.cancel()
	<-pw.done
}

// waitFirst waits, at most firstLookupWait in all, for the first report
// of each watcher.
func waitFirst(ws []*poolWatch) {
	deadline := time.After(firstLookupWait)
	for _, pw := range ws {
		select {
		case <-pw.first:
		case <-deadline:
			return
		}
	}
}

// close stops every watcher and the applier; none starts after. Not
// under the reload lock: the applier may be waiting for it.
func (ds *discoveries) close() {
	ds.mu.Lock()
	ds.closed = true
	pools := ds.pools
	ds.pools = nil
	ds.mu.Unlock()
	for _, pw := range pools {
		pw.stop()
	}
	ds.stopApply()
	<-ds.applierEnd
}

// sameSpec reports whether two discovery blocks look up alike (the
// line they are written on aside): a reload that keeps a block keeps its
// watcher and the set it found.
func sameSpec(a, b config.Discovery) bool {
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b)
}

// watcherSet is a pool's discovered backends as a watcher's set (the
// records' priorities and targets are not kept: a lookup that finds the
// same addresses reports them once, and the pool is left as it is).
func watcherSet(bs []config.Backend) []discovery.Backend {
	var out []discovery.Backend
	for _, b := range bs {
		if ap, err := config.ParseBackendAddr(b.Addr); err == nil {
			out = append(out, discovery.Backend{Addr: ap, Weight: b.Weight})
		}
	}
	return out
}

// discoveredBackends is what a lookup found as the pool's backends.
func discoveredBackends(d config.Discovery, s discovery.Set) []config.Backend {
	out := make([]config.Backend, 0, len(s.Backends))
	for _, db := range s.Backends {
		b := config.DefaultBackend()
		b.Addr, b.Line, b.MaxConnections, b.Backup = db.Addr.String(), d.Line, d.MaxConnections, d.Backup
		b.Weight = d.Weight
		if d.SRV != "" {
			b.Weight = db.Weight
		}
		out = append(out, b)
	}
	return out
}

// discovered takes a pool's new discovered set (a watcher's goroutine)
// and has it served when it changed what the pool has.
func (in *instance) discovered(pool string, d config.Discovery, s discovery.Set) {
	if in.members.Discovered(pool, discoveredBackends(d, s)) {
		in.discovery.changed()
	}
}

// applyDiscovered serves the discovered sets (and the fleet's API
// additions) as they are now, unless the pools were built from them
// already. While an upgrade hands the state over nothing is changed
// (admin.ErrRefused, returned: the new process looks up on its own).
func (in *instance) applyDiscovered() error {
	if in.members.Version() == in.servedMembers.Load() {
		return nil
	}
	err := in.changeMembers(memberChange{source: "dns"})
	if err != nil && !errors.Is(err, admin.ErrRefused) && !errors.Is(err, errStopping) && !in.stopping.Load() {
		in.log.Error("discovery: the pools keep their backends: the new sets cannot be served", "error", err)
	}
	return err
}

// memberChange is one change of membership. apply makes it on the
// members (given the file's configuration), its undo puts them back;
// commit, when set, runs next, before the pools are rebuilt (a fleet's
// write, a removal's drain), and an error from it undoes apply; revert
// takes commit back when the rebuild fails. resync, when set, runs after
// such an undo: an undo is made on the members as they are then, which
// another instance's record may have replaced meanwhile.
type memberChange struct {
	source string
	apply  func(file *config.Config) (undo func(), err error)
	commit func() error
	revert func()
	resync func()
}

// changeMembers makes the change and serves the pools it leaves, as a
// reload does: under the reload lock, with no operator's action under way
// (refused while an upgrade hands this process's state over). A change
// the pools cannot be built with is undone.
func (in *instance) changeMembers(ch memberChange) error {
	in.reloadMu.Lock()
	defer in.reloadMu.Unlock()
	return in.config.HoldActions(func() error {
		in.mu.Lock()
		file, before := in.file, in.cfg
		in.mu.Unlock()
		if file == nil || in.stopping.Load() || !in.started.Load() {
			return errStopping
		}
		undo := func() {}
		if ch.apply != nil {
			u, err := ch.apply(file)
			if err != nil {
				return err
			}
			undo = u
		}
		if ch.commit != nil {
			if err := ch.commit(); err != nil {
				undo()
				if ch.resync != nil {
					ch.resync()
				}
				return err
			}
		}
		version := in.members.Version()
		next := in.members.Pools(file)
		if _, err := in.serve(next); err != nil {
			undo()
			if ch.revert != nil {
				ch.revert()
			}
			if ch.resync != nil {
				ch.resync()
			}
			return fmt.Errorf("%w: %v", admin.ErrInvalid, err)
		}
		in.servedMembers.Store(version)
		logMembership(in.log, ch.source, before, next)
		in.saveMembers()
		return nil
	})
}

// errStopping: no change of membership before the process serves or
// once it stops.
var errStopping = errors.New("l4lb is not serving (starting or stopping): try again")

// logMembership says which backends a change added to and removed from
// each pool.
func logMembership(log *slog.Logger, source string, before, after *config.Config) {
	for _, name := range after.PoolNames {
		was := map[netip.AddrPort]bool{}
		if p := before.Pools[name]; p != nil {
			for _, b := range p.Backends {
				ap, _ := config.ParseBackendAddr(b.Addr)
				was[ap] = true
			}
		}
		var added, removed []string
		now := map[netip.AddrPort]bool{}
		for _, b := range after.Pools[name].Backends {
			ap, _ := config.ParseBackendAddr(b.Addr)
			now[ap] = true
			if !was[ap] {
				added = append(added, b.Addr)
			}
		}
		if p := before.Pools[name]; p != nil {
			for _, b := range p.Backends {
				if ap, _ := config.ParseBackendAddr(b.Addr); !now[ap] {
					removed = append(removed, b.Addr)
				}
			}
		}
		if len(added)+len(removed) > 0 {
			log.Info("pool membership changed", "pool", name, "source", source, "added", added, "removed", removed,
				"backends", len(after.Pools[name].Backends))
		}
	}
}

// saveMembers keeps the API's additions where they outlive the process:
// the state file (a restart), beside the drains, weights and disables.
func (in *instance) saveMembers() {
	in.state.Save(in.store.store, in.livePools)
}

// apiMembers is the admin API's Membership: POST and DELETE on
// /api/v1/pools/{pool}/backends.
type apiMembers struct{ in *instance }

func (m apiMembers) AddBackend(ctx context.Context, name string, nb admin.NewBackend) error {
	in := m.in
	return in.againOnFleetChange(name, func() error {
		return in.changeMembers(in.shared(ctx, name, memberChange{source: "api", apply: func(file *config.Config) (func(), error) {
			p := file.Pools[name]
			if p == nil {
				return nil, fmt.Errorf("%w %q", admin.ErrNoPool, name)
			}
			undo, err := in.members.Add(p, membership.Added{Addr: nb.Addr, Weight: nb.Weight, ID: nb.ID})
			return undo, adminError(err)
		}}))
	})
}

func (m apiMembers) RemoveBackend(ctx context.Context, name, addr string, drainTimeout time.Duration) error {
	return m.in.againOnFleetChange(name, func() error { return m.removeBackend(ctx, name, addr, drainTimeout) })
}

func (m apiMembers) removeBackend(ctx context.Context, name, addr string, drainTimeout time.Duration) error {
	in := m.in
	var spelled string
	ch := memberChange{source: "api", apply: func(file *config.Config) (func(), error) {
		p := file.Pools[name]
		if p == nil {
			return nil, fmt.Errorf("%w %q", admin.ErrNoPool, name)
		}
		sp, undo, err := in.members.Remove(p, addr)
		spelled = sp
		return undo, adminError(err)
	}}
	ch = in.shared(ctx, name, ch)
	share := ch.commit
	ch.commit = func() error {
		if share != nil {
			if err := share(); err != nil {
				return err
			}
		}
		// No new client from now; the connections still open at the
		// deadline are reset, from the backend the rebuild retires.
		for _, lp := range in.livePools() {
			if b, ok := lp.Backend(spelled); ok && lp.Name == name {
				return lp.Drain(ctx, b, drainTimeout)
			}
		}
		return nil
	}
	return in.changeMembers(ch)
}

// adminError is a membership error as the admin API answers it: its
// message, and the admin error its status comes from.
func adminError(err error) error {
	for _, e := range []struct{ from, to error }{
		{membership.ErrNoPool, admin.ErrNoPool}, {membership.ErrNoBackend, admin.ErrNoBackend},
		{membership.ErrExists, admin.ErrExists}, {membership.ErrNotRemovable, admin.ErrNotRemovable},
		{membership.ErrInvalid, admin.ErrInvalid},
	} {
		if errors.Is(err, e.from) {
			return statusError{err: err, status: e.to}
		}
	}
	return err
}

// statusError is err, which also is status (an admin API error).
type statusError struct{ err, status error }

func (e statusError) Error() string   { return e.err.Error() }
func (e statusError) Unwrap() []error { return []error{e.err, e.status} }
