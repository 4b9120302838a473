// Package fleetsim simulates a fleet of l4lb instances sharing breaker
// state through one real redis-server, to measure what the fleet store
// costs Redis and how fast a trip reaches every instance: N instances,
// each the real fleet.Store (its own rueidis client and Run loop) with M
// real breakers (breaker.Breaker with its Run, Async, as the pools build
// them), in one process.
//
// The schedule (Run):
//
//  1. Setup: the server, the stores, N×M breakers; then a warm-up of two
//     sync intervals, unmeasured.
//  2. Idle, the first half of the duration: nothing trips. Measured:
//     Redis's commands/s and CPU.
//  3. Trips, the second half: a few backends (Options.Trips) are tripped,
//     each on one instance (its breaker sees Failures failed dials), at
//     even intervals. A tripped backend fails its first recovery probe,
//     which re-opens the breaker with a doubled cooldown, and is healthy
//     from then on: the next probe closes it for the fleet. The phase
//     ends when every instance reads every tripped backend closed again
//     (bounded: at most the half duration plus 30 s).
//  4. Idle again, as long as the trip phase: the second reference for
//     what the trips cost above the idle load.
//
// What each figure means is on Result (result.go).
package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/fleet"
)

// Options size one simulation; zero fields take the defaults below.
type Options struct {
	Instances, Backends int
	// Duration is the idle phase and the trip phase together (half each);
	// setup and warm-up come before it.
	Duration time.Duration
	// Trips is how many backends are tripped (default 5, at most
	// Backends).
	Trips int
	// Cooldown is the breakers' first cooldown (default 1 s, so a trip's
	// life fits a short run); max_cooldown is four times it.
	Cooldown time.Duration
	// SyncInterval is [cluster] sync_interval and Timeout [cluster]
	// timeout (defaults l4lb's).
	SyncInterval, Timeout time.Duration
	// Refresh is the breakers' snapshot refresh (default l4lb's, 500 ms).
	// Every refresh is a Store read, in this one process for the whole
	// fleet: N×M/Refresh reads a second, which at 100×1,000 is more CPU
	// than a shared 2-core machine has, and a starved process misses its
	// Store timeouts. A longer one costs the simulation less; it changes
	// what the instances send Redis only where reads are not cached.
	Refresh time.Duration
	// RedisServer is the redis-server binary (default "redis-server").
	RedisServer string
	// Logf reports progress; nil: silent.
	Logf func(format string, args ...any)
	// Logger receives the stores' logs (store up and down); nil: discard.
	Logger *slog.Logger
}

// The simulation's bounds: every loop below ends by count or by these.
const (
	sampleEvery   = 5 * time.Millisecond
	recoveryGrace = 30 * time.Second
	setupTimeout  = 10 * time.Minute
	minDuration   = 4 * time.Second
	setupTries    = 20
	setupParallel = 4
)

func (o *Options) fill() error {
	if o.Instances < 2 || o.Backends < 1 {
		return fmt.Errorf("fleet simulation: -instances %d and -backends %d: at least 2 instances and 1 backend", o.Instances, o.Backends)
	}
	if o.Duration < minDuration {
		return fmt.Errorf("fleet simulation: -duration %v: at least %v", o.Duration, minDuration)
	}
	if o.Trips <= 0 {
		o.Trips = 5
	}
	o.Trips = min(o.Trips, o.Backends)
	if o.Cooldown <= 0 {
		o.Cooldown = time.Second
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = config.DefaultCluster().SyncInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = config.DefaultCluster().Timeout
	}
	if o.Refresh <= 0 {
		o.Refresh = 500 * time.Millisecond
	}
	if o.RedisServer == "" {
		o.RedisServer = "redis-server"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// sim is one run's state.
type sim struct {
	o        Options
	srv      *server
	keys     map[string]int // breaker key → backend index
	healthy  []atomic.Bool  // per backend
	stores   []*fleet.Store
	breakers [][]*breaker.Breaker // [instance][backend]

	mu           sync.Mutex
	trips        map[int]*tripRec // by backend, once tripped
	probes       map[probeAt]int  // probes made, by backend and generation
	first        map[int]bool     // backends whose first probe of their trip failed
	probesApart  int              // probes made by an instance apart from Redis
	fails        atomic.Int64     // ClientFailures
	apart        atomic.Int64     // InstancesApartMax
	probeN       atomic.Int64     // Probes
	setupRetries atomic.Int64
}

type probeAt struct {
	backend int
	gen     uint64
}

// tripRec is one trip as the instances saw it.
type tripRec struct {
	tripper   int
	start     time.Time     // the tripping Store.Trip call began
	took      time.Duration // and how long it took to answer
	gen       uint64        // the generation the trip opened
	opened    []time.Time
	closed    []bool
	recovered bool // healthy again: client failures are no longer counted
}

// Run runs one simulation.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.fill(); err != nil {
		return Result{}, err
	}
	srv, err := startServer(o.RedisServer)
	if err != nil {
		return Result{}, err
	}
	defer srv.stop()
	s := &sim{o: o, srv: srv, keys: map[string]int{}, healthy: make([]atomic.Bool, o.Backends),
		trips: map[int]*tripRec{}, probes: map[probeAt]int{}, first: map[int]bool{}}
	for b := range o.Backends {
		s.keys[backendKey(b)] = b
		s.healthy[b].Store(true)
	}
	res := Result{Instances: o.Instances, Backends: o.Backends, DurationS: o.Duration.Seconds(),
		SyncIntervalS: o.SyncInterval.Seconds(), TimeoutS: o.Timeout.Seconds(), RefreshS: o.Refresh.Seconds(), CooldownS: o.Cooldown.Seconds(), Trips: o.Trips,
		GOMAXPROCS: runtime.GOMAXPROCS(0), Started: time.Now().UTC().Format(time.RFC3339)}
	if inf, err := srv.info("server"); err == nil {
		res.RedisVersion = inf["redis_version"]
	}

	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	setupStart := time.Now()
	if err := s.setup(rctx, &wg); err != nil {
		return res, err
	}
	wg.Go(func() { s.watch(rctx) })
	res.SetupS = time.Since(setupStart).Seconds()
	res.SetupRetries = int(s.setupRetries.Load())
	o.Logf("fleet: %d instances × %d backends running after %.1f s; warm-up %v", o.Instances, o.Backends, res.SetupS, 2*o.SyncInterval)
	a, err := srv.after(rctx, pause(2*o.SyncInterval))
	if err != nil {
		return res, err
	}
	b, err := srv.after(rctx, pause(o.Duration/2))
	if err != nil {
		return res, err
	}
	idle := diff(a, b)
	res.IdleS = idle.seconds
	res.RedisCommandsPerSIdle = idle.commands / idle.seconds
	res.RedisCPUIdlePct = 100 * idle.cpu / idle.seconds
	res.RedisCallsPerSIdle = perUnit(idle.calls, idle.seconds)
	o.Logf("fleet: idle %.1f s: %.0f commands/s, redis CPU %.1f%%", idle.seconds, res.RedisCommandsPerSIdle, res.RedisCPUIdlePct)

	c, err := srv.after(rctx, s.tripPhase)
	if err != nil {
		return res, err
	}
	trip := diff(b, c)
	res.TripPhaseS = trip.seconds
	res.RedisCPUTripPct = 100 * trip.cpu / trip.seconds
	// The idle load is the reference the trips' cost stands out from; it
	// is measured again after the trip phase, as long, and the two idle
	// windows' mean rate is taken out: a slow drift of the idle load
	// (the machine's) cancels better than with the first window alone.
	d, err := srv.after(rctx, pause(time.Duration(trip.seconds*float64(time.Second))))
	if err != nil {
		return res, err
	}
	after := diff(c, d)
	res.IdleAfterS = after.seconds
	res.RedisCommandsPerSIdleAfter = after.commands / after.seconds
	ref := (idle.commands + after.commands) / (idle.seconds + after.seconds)
	res.RedisCommandsPerTrip = (trip.commands - ref*trip.seconds) / float64(o.Trips)
	res.RedisCallsPerTrip = map[string]float64{}
	for k, v := range trip.calls {
		refk := (idle.calls[k] + after.calls[k]) / (idle.seconds + after.seconds)
		res.RedisCallsPerTrip[k] = round((v - refk*trip.seconds) / float64(o.Trips))
	}
	s.results(&res)
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAverage = strings.TrimSpace(string(la))
	}
	return res, nil
}

func backendKey(b int) string { return fmt.Sprintf("sim/10.0.%d.%d:80", b/250, b%250) }

// setup makes every instance's Store and breakers, an instance per
// goroutine, and starts their Run loops on wg.
func (s *sim) setup(ctx context.Context, wg *sync.WaitGroup) error {
	cl := config.DefaultCluster()
	def := config.DefaultBreaker()
	bcfg := breaker.Config{Failures: def.Failures, Window: def.Window, Cooldown: s.o.Cooldown,
		MaxCooldown: 4 * s.o.Cooldown, Successes: def.Successes}
	s.stores = make([]*fleet.Store, s.o.Instances)
	s.breakers = make([][]*breaker.Breaker, s.o.Instances)
	errs := make([]error, s.o.Instances)
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	// A few instances at a time: N×M first reads at once would be a
	// storm of their own (each is three cache misses), which a fleet
	// starting together would also make, but is not what is measured.
	var build sync.WaitGroup
	slots := make(chan struct{}, setupParallel)
	for i := range s.o.Instances {
		slots <- struct{}{}
		build.Go(func() {
			defer func() { <-slots }()
			errs[i] = s.instance(ctx, sctx, wg, i, cl, bcfg)
		})
	}
	build.Wait()
	return errors.Join(errs...)
}

// instance builds instance i within setup's deadline; its Run loops run
// until ctx ends.
func (s *sim) instance(ctx, setup context.Context, wg *sync.WaitGroup, i int, cl config.Cluster, bcfg breaker.Config) error {
	st, err := fleet.New(fleet.Config{RedisURL: "redis://" + s.srv.addr, KeyPrefix: cl.KeyPrefix,
		SyncInterval: s.o.SyncInterval, Timeout: s.o.Timeout, Instance: fmt.Sprintf("sim-%d", i)}, fleet.Options{Logger: s.o.Logger})
	if err != nil {
		return fmt.Errorf("instance %d: %w", i, err)
	}
	s.stores[i] = st
	wg.Go(func() { st.Run(ctx) })
	store := timedStore{Store: st, sim: s, instance: i}
	bs := make([]*breaker.Breaker, s.o.Backends)
	for b := range s.o.Backends {
		if err := setup.Err(); err != nil {
			return fmt.Errorf("instance %d: setup: %w", i, err)
		}
		var br *breaker.Breaker
		probe := func(context.Context) breaker.Result { return s.probe(b, br.State().Generation, st.Up()) }
		// New reads the key within the breaker's store timeout (1 s): at
		// setup N×M reads at once can take longer on a busy Redis, so a
		// few tries.
		for try := 0; ; try++ {
			br, err = breaker.New(backendKey(b), bcfg, store, breaker.Options{
				Async: true, Probe: probe, Owner: fmt.Sprintf("sim-%d", i), SnapshotRefresh: s.o.Refresh,
				Events: breaker.Events{Changed: func(key string, st breaker.State) { s.changed(i, key, st) }},
			})
			if err == nil {
				break
			}
			if try == setupTries-1 || setup.Err() != nil {
				return fmt.Errorf("instance %d backend %d: %w", i, b, err)
			}
			s.setupRetries.Add(1)
		}
		bs[b] = br
	}
	s.breakers[i] = bs
	for _, br := range bs {
		wg.Go(func() { br.Run(ctx) })
	}
	return nil
}

// timedStore is an instance's Store with the start of its trips noted.
type timedStore struct {
	*fleet.Store
	sim      *sim
	instance int
}

func (t timedStore) Trip(ctx context.Context, key string, seen uint64, cooldown, ttl time.Duration) (breaker.State, bool, error) {
	start := time.Now()
	st, ok, err := t.Store.Trip(ctx, key, seen, cooldown, ttl)
	if ok && err == nil {
		t.sim.tripped(t.instance, key, start, time.Since(start), st.Generation)
	}
	return st, ok, err
}

// Vote is how a breaker trips through a Store with a trip quorum
// (breaker.Quorum, which fleet.Store is, whatever its quorum): the trip
// that opens the breaker is noted as Trip's is.
func (t timedStore) Vote(ctx context.Context, key string, seen uint64, cooldown, ttl, window time.Duration) (breaker.State, bool, bool, error) {
	start := time.Now()
	st, tripped, voted, err := t.Store.Vote(ctx, key, seen, cooldown, ttl, window)
	if tripped && err == nil {
		t.sim.tripped(t.instance, key, start, time.Since(start), st.Generation)
	}
	return st, tripped, voted, err
}

func (s *sim) tripped(i int, key string, start time.Time, took time.Duration, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tr := s.trips[s.keys[key]]; tr != nil && tr.gen == 0 {
		tr.start, tr.took, tr.gen, tr.tripper = start, took, gen, i
	}
}

// changed is every breaker's Events.Changed.
func (s *sim) changed(i int, key string, st breaker.State) {
	b, ok := s.keys[key]
	if !ok {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	tr := s.trips[b]
	if tr == nil {
		return
	}
	if st.Open && tr.opened[i].IsZero() {
		tr.opened[i] = now
	}
	if !st.Open && tr.gen != 0 && st.Generation > tr.gen {
		tr.closed[i] = true
	}
}

// probe is every breaker's recovery dial: it fails while the backend is
// down, and the first failure of a trip brings the backend back. Probes
// by an instance deciding alone (its Store apart from Redis: it probes
// under its own lock, docs/fleet.md) are counted apart.
func (s *sim) probe(b int, gen uint64, up bool) breaker.Result {
	s.probeN.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if up {
		s.probes[probeAt{b, gen}]++
	} else {
		s.probesApart++
	}
	if s.healthy[b].Load() {
		return breaker.Success
	}
	if !s.first[b] {
		s.first[b] = true
		if tr := s.trips[b]; tr != nil {
			tr.recovered = true
		}
		s.healthy[b].Store(true)
	}
	return breaker.Failure
}

// watch samples, every 5 ms until ctx ends: the client dials a converged
// instance would still send to a down backend, and the instances apart.
func (s *sim) watch(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		apart := 0
		for _, st := range s.stores {
			if !st.Up() {
				apart++
			}
		}
		if int64(apart) > s.apart.Load() {
			s.apart.Store(int64(apart))
		}
		s.mu.Lock()
		for b, tr := range s.trips {
			if tr.recovered {
				continue
			}
			for i, at := range tr.opened {
				if !at.IsZero() && s.breakers[i][b].Allow() {
					s.fails.Add(1)
				}
			}
		}
		s.mu.Unlock()
	}
}

// tripPhase trips o.Trips backends at even intervals over the first part
// of the half duration, then waits until every instance read every one
// closed again, at most the half duration plus recoveryGrace.
func (s *sim) tripPhase(ctx context.Context) error {
	half := s.o.Duration / 2
	// A trip's life is about three cooldowns (the first, the doubled one
	// after the failed probe, and its jitter): the last trip leaves that.
	span := max(0, half-3*s.o.Cooldown)
	gap := span / time.Duration(s.o.Trips)
	end := time.Now().Add(half + recoveryGrace)
	for k := range s.o.Trips {
		b := k * s.o.Backends / s.o.Trips
		i := k % s.o.Instances
		s.mu.Lock()
		s.trips[b] = &tripRec{tripper: i, opened: make([]time.Time, s.o.Instances), closed: make([]bool, s.o.Instances)}
		s.healthy[b].Store(false)
		s.mu.Unlock()
		br := s.breakers[i][b]
		for range br.Config().Failures {
			br.Done(br.Begin(breaker.KindClient), breaker.Failure)
		}
		s.o.Logf("fleet: trip %d: backend %d on instance %d", k+1, b, i)
		if err := sleep(ctx, gap); err != nil {
			return err
		}
	}
	for time.Now().Before(end) {
		if s.allClosed() {
			return sleep(ctx, 500*time.Millisecond) // the re-reads after the last close
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	s.o.Logf("fleet: not every trip recovered on every instance within %v", half+recoveryGrace)
	return nil
}

func (s *sim) allClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range s.trips {
		if slices.Contains(tr.closed, false) {
			return false
		}
	}
	return true
}

// after runs step, then samples the server.
func (srv *server) after(ctx context.Context, step func(context.Context) error) (sample, error) {
	if err := step(ctx); err != nil {
		return sample{}, err
	}
	return srv.sample()
}

// pause is a step that waits d.
func pause(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error { return sleep(ctx, d) }
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
