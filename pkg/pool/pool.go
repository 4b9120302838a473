package pool

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/health"
	"github.com/l4lb/l4lb/pkg/pick"
)

// Deps are what a Pool shares with the rest of the process.
type Deps struct {
	// Store keeps breaker state and manual disables; one per process (or
	// fleet). Required.
	Store breaker.Store
	// Logger gets backend state changes; nil discards.
	Logger *slog.Logger
	// Clock is the clock of slow start, drains, the breakers and the
	// health checks run per backend (Prober.Run); dials stay bounded by
	// real time. nil: clock.Real.
	Clock clock.Clock
	// BreakerRefresh is how often breaker snapshots are re-read; 0: default.
	BreakerRefresh time.Duration
	// RemoteStore says Store is shared over the network (a fleet): the
	// breakers then make their transitions on their own goroutines
	// (breaker.Options.Async), never on the event loop that reported the
	// dial.
	RemoteStore bool
	// Owner is this instance's probe-lock token in the Store; "": random
	// per breaker.
	Owner string
	// CutBackend resets the connections still open to a backend whose
	// drain ran out of time (the event loops hold them); nil: none cut.
	CutBackend func(*Backend)
	// OnRuntimeChange is called after an operator's drain or weight
	// change (the state file is rewritten); nil: nothing.
	OnRuntimeChange func()
	// HealthChecks runs the health checks of every pool: one per process,
	// the same across reloads, so 1,000 backends cost a few workers rather
	// than a goroutine each. nil: a goroutine per backend (Prober.Run).
	HealthChecks *health.Scheduler
	// Runtime gives, by "pool/identity", the drain and weight a backend
	// not carried from Previous starts with (the state file at start).
	Runtime map[string]Runtime
	// Previous is the pool of the same name in the configuration being
	// replaced (a reload); nil at start. A backend of the same identity
	// (id, else addr) carries its counters, load and slow start, and, at
	// the same address, its health; breaker state and manual disables are
	// in the Store under its identity, so they carry by themselves. A
	// backend new to the pool starts health-down: checked before use.
	Previous *Pool
	// InitialHealth gives, by backend identity, the health a backend not
	// carried from Previous starts with (an upgrade's hand-off); nil or
	// absent: up (a fresh start) or down (added by a reload).
	InitialHealth map[string]bool
}

// Pool is a configured pool, live.
type Pool struct {
	Name      string
	Algorithm string
	cfg       *config.Pool
	backends  []*Backend
	byID      map[string]*Backend // a reload finds each backend's predecessor here
	// leaving are backends that left the pool (a reload, the API or
	// discovery removed them; Departed stand-ins) while connections on
	// them still finish: what the API and the metrics show of those.
	leavingMu sync.Mutex
	leaving   []*Backend
	departed  map[string]*Backend // Departed's stand-ins, by identity and address
	// primaries and backups are the pool's two sets, each with its
	// picker, rebuilt when an operator sets a weight (backup.go).
	primaries, backups *set
	pickCfg            pick.Config
	wmu                sync.Mutex // serialises picker rebuilds
	// rotMu guards the counts of backends in rotation per set and
	// logged, the serving set last logged.
	rotMu    sync.Mutex
	logged   Serving
	dialer   *dialer.Dialer
	clock    clock.Clock
	log      *slog.Logger
	cut      func(*Backend)
	onChange func()
	srcs     *sources
	checks   *health.Scheduler
	caFile   *health.CAFile // the tls checks' CA bundle; nil: none
	// proxyVersion is proxy_protocol as a number (ProxyProtocol).
	proxyVersion int
	// successor is the pool that replaced this one at a reload (HandOver);
	// nil while it serves, or when the reload removed it.
	successor atomic.Pointer[Pool]
}

// Current is the pool serving in p's place now: p, or the pool that
// replaced it at the last reload (or change of membership) that kept a
// pool of its name. A client that has not dialed yet (one waiting for its
// pool to recover) follows it.
func (p *Pool) Current() *Pool {
	for {
		next := p.successor.Load()
		if next == nil {
			return p
		}
		p = next
	}
}

// Runtime is what an operator changed on one backend at run time, as the
// state file keeps it: a weight other than the configured one (with the
// configured weight it replaced, so a file edited since wins) and a drain.
type Runtime struct {
	Weight           *int
	ConfiguredWeight int
	Drained          bool
	// DrainSince and DrainDeadline are the drain's, so that its deadline
	// holds across an upgrade or a restart (the connections still open
	// then are reset, as they would have been); zero in a record written
	// before they were kept: the drain counts from the restore, its
	// deadline passed.
	DrainSince, DrainDeadline time.Time
}

// New builds a pool from its configuration. Nothing runs until Run.
func New(cfg *config.Pool, deps Deps) (*Pool, error) {
	if deps.Store == nil {
		return nil, fmt.Errorf("pool %s: no breaker store", cfg.Name)
	}
	if err := checkKinds(cfg); err != nil {
		return nil, err
	}
	deps.Clock = clock.Or(deps.Clock)
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{
		Name:         cfg.Name,
		Algorithm:    cfg.Algorithm,
		cfg:          cfg,
		dialer:       dialer.New(cfg.ConnectTimeout).WithSources(sourceAddrs(cfg.Sources)),
		srcs:         newSources(cfg.Sources, deps.Previous),
		checks:       deps.HealthChecks,
		proxyVersion: proxyVersion(cfg.ProxyProtocol),
		clock:        deps.Clock,
		log:          log.With("pool", cfg.Name),
		cut:          deps.CutBackend,
		onChange:     deps.OnRuntimeChange,
	}
	p.caFile = caFileOf(cfg, p.log)
	p.byID = make(map[string]*Backend, len(cfg.Backends))
	for i, bc := range cfg.Backends {
		b, err := p.newBackend(i, bc, deps)
		if err != nil {
			return nil, err
		}
		b.usable.Store(b.Usable())
		p.backends = append(p.backends, b)
		if _, dup := p.byID[b.ID]; !dup {
			p.byID[b.ID] = b
		}
	}
	p.pickCfg = pick.Config{
		Algorithm:         cfg.Algorithm,
		HashKey:           cfg.HashKey,
		SlowStart:         cfg.SlowStart,
		HashBalanceFactor: cfg.HashBalanceFactor,
		RingVnodes:        cfg.RingVnodes,
		MaglevTableSize:   cfg.MaglevTableSize,
		Now:               deps.Clock.Now,
		// Every change of a backend's load or usability is told to the
		// picker (Backend.notify), so its structures are exact.
		Notified: true,
	}
	if err := p.buildSets(); err != nil {
		return nil, err
	}
	p.countRotation(deps.Previous)
	return p, nil
}

func (p *Pool) newBackend(i int, bc config.Backend, deps Deps) (*Backend, error) {
	ap, err := netip.ParseAddrPort(bc.Addr)
	if err != nil {
		return nil, fmt.Errorf("pool %s backend %s: %w", p.Name, bc.Addr, err)
	}
	b := &Backend{Addr: bc.Addr, AddrPort: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ID: bc.Identity(),
		source: bc.Source, cfgWeight: bc.Weight, maxConns: int64(bc.MaxConnections), index: i, backup: bc.Backup}
	b.weight.Store(int32(bc.Weight))
	prev := deps.Previous.backend(bc.Identity())
	if prev != nil {
		b.counters = prev.counters
		if since := prev.usableSince.Load(); since != nil {
			b.usableSince.Store(since)
		}
		p.carryRuntime(b, prev)
	} else {
		b.counters = &counters{}
		p.restoreRuntime(b, deps.Runtime[p.Name+"/"+b.ID])
	}
	// One logger names the backend for every line about it, so the breaker
	// and the prober add no backend attribute of their own.
	blog := p.log.With("backend", bc.Addr)
	// Keyed by identity, so a reload (or an upgrade's hand-off) that keeps
	// the backend keeps its breaker state and manual disable.
	brk, err := breaker.New(p.Name+"/"+bc.Identity(), breaker.Config{
		Failures:    p.cfg.Breaker.Failures,
		Window:      p.cfg.Breaker.Window,
		MinRatio:    p.cfg.Breaker.MinRatio,
		MinVolume:   p.cfg.Breaker.MinVolume,
		Cooldown:    p.cfg.Breaker.Cooldown,
		MaxCooldown: p.cfg.Breaker.MaxCooldown,
		Successes:   p.cfg.Breaker.Successes,
	}, deps.Store, breaker.Options{
		Clock:           deps.Clock,
		Logger:          blog,
		Events:          p.breakerEvents(b),
		Probe:           p.probeFunc(b),
		SnapshotRefresh: deps.BreakerRefresh,
		Async:           deps.RemoteStore,
		Owner:           deps.Owner,
	})
	if err != nil {
		return nil, fmt.Errorf("pool %s backend %s: %w", p.Name, bc.Addr, err)
	}
	b.breaker = brk
	if prev != nil && prev.Addr == bc.Addr && prev.breaker != nil {
		brk.Inherit(prev.breaker) // its failure window survives the reload
	}
	if p.cfg.Health.Enabled {
		hc := p.healthCheck(b)
		check := func(ctx context.Context) health.Outcome {
			gen := b.breaker.State().Generation // captured before the check's first packet
			o := hc(ctx)
			// One check is one health dial, counted by its result: for a
			// connect check that is the connect's outcome; a send-expect
			// check that connected and got no (or the wrong) reply fails.
			// The cause goes on to the prober, which keeps and logs it.
			b.countDial(DialHealth, outcome(o.Result))
			b.readmit.record(gen, o.Result)
			return o
		}
		prober, err := health.New(p.Name+"/"+bc.Addr, health.Config{
			Enabled:  true,
			Interval: p.cfg.Health.Interval,
			Timeout:  p.cfg.Health.Timeout,
			Rise:     p.cfg.Health.Rise,
			Fall:     p.cfg.Health.Fall,
		}, check, health.Options{
			Logger:   blog,
			Clock:    deps.Clock,
			OnChange: func(_ string, up bool) { p.healthChanged(b, up) },
		})
		if err != nil {
			return nil, fmt.Errorf("pool %s backend %s: %w", p.Name, bc.Addr, err)
		}
		prober.Seed(initialHealth(bc, prev, deps))
		b.health = prober
	}
	return b, nil
}

// initialHealth is the health a backend's prober starts from.
func initialHealth(bc config.Backend, prev *Backend, deps Deps) bool {
	if prev != nil && prev.Addr == bc.Addr {
		return prev.HealthUp() // the same backend at the same address
	}
	if up, ok := deps.InitialHealth[bc.Identity()]; ok {
		return up
	}
	// At start every backend is up (a fresh start is never all-down); one
	// a reload adds, or moves to a new address, is checked before use.
	return deps.Previous == nil
}

// backend finds a backend by identity; nil on a nil pool.
func (p *Pool) backend(identity string) *Backend {
	if p == nil {
		return nil
	}
	return p.byID[identity]
}

// HandOver tells p's backends which backend of next, the pool replacing
// p at a reload, carries each on (same identity at the same address), or
// that it is gone; nil next: the reload removed the pool. Call it once
// next serves, before p stops. The results of dials made through p that
// end later go to the successor's breaker (breaker.HandOver): p's breakers
// stop with p, and in a fleet (Deps.RemoteStore) the transitions those
// results ask for would otherwise never be made.
func (p *Pool) HandOver(next *Pool) {
	if next != nil {
		p.successor.Store(next)
	}
	for _, b := range p.backends {
		if n := next.backend(b.ID); n != nil && n.Addr == b.Addr {
			b.breaker.HandOver(n.breaker)
			b.handedTo.Store(n)
		} else {
			b.handedTo.Store(retired)
			next.addLeaving(b)
		}
	}
	for _, b := range p.Leaving() {
		next.addLeaving(b)
	}
}

// HealthStates reports each backend's health by identity (for an
// upgrade's hand-off to the next process).
func (p *Pool) HealthStates() map[string]bool {
	m := make(map[string]bool, len(p.backends))
	for _, b := range p.backends {
		m[b.ID] = b.HealthUp()
	}
	return m
}

// Run runs the breakers' recovery loops and the health checks until ctx is
// done, and returns once they have all stopped.
func (p *Pool) Run(ctx context.Context) {
	var wg sync.WaitGroup
	var waits []func()
	for _, b := range p.backends {
		wg.Go(func() { b.breaker.Run(ctx) })
		switch {
		case b.health == nil:
		case p.checks != nil:
			waits = append(waits, p.checks.Add(ctx, b.health))
		default:
			wg.Go(func() { b.health.Run(ctx) })
		}
	}
	wg.Wait()
	for _, w := range waits {
		w()
	}
}

// Backends lists the pool's backends in configuration order.
func (p *Pool) Backends() []*Backend { return p.backends }

// Backend finds a backend by its configured address.
func (p *Pool) Backend(addr string) (*Backend, bool) {
	for _, b := range p.backends {
		if b.Addr == addr {
			return b, true
		}
	}
	return nil, false
}

// Disable and Enable are the manual admin switch (breaker rule 5).
func (p *Pool) Disable(ctx context.Context, b *Backend) error {
	if err := b.breaker.Disable(ctx); err != nil {
		return err
	}
	p.log.Info("backend disabled by operator", "backend", b.Addr)
	b.refreshUsable(p.clock.Now)
	p.changed()
	return nil
}

// Enable of a backend whose breaker is open also asks for its recovery
// probe now: the operator says it is back, and the probe checks.
func (p *Pool) Enable(ctx context.Context, b *Backend) error {
	if err := b.breaker.Enable(ctx); err != nil {
		return err
	}
	st := b.breaker.State()
	drained := p.undrain(b)
	p.log.Info("backend enabled by operator", "backend", b.Addr, "breaker_open", st.Open, "was_draining", drained)
	p.changed()
	if st.Open {
		b.breaker.ProbeNow()
	}
	b.refreshUsable(p.clock.Now)
	return nil
}

// What the sets' pickers read on every pick (their pick.State), by index
// in the pool.

// Usable, for the picker, is also "takes new clients": a draining backend
// and one at its max_connections are skipped like unusable ones, without
// touching the moment usability came back (slow start).
func (p *Pool) Usable(i int) bool {
	b := p.backends[i]
	return b.refreshUsable(p.clock.Now) && !b.Draining() && !b.Full()
}
func (p *Pool) Active(i int) int64 { return p.backends[i].active.Load() }
func (p *Pool) UsableSince(i int) time.Time {
	if t := p.backends[i].usableSince.Load(); t != nil {
		return *t
	}
	return time.Time{}
}
