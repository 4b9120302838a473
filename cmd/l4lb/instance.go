package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/handoff"
	"github.com/l4lb/l4lb/pkg/membership"
	"github.com/l4lb/l4lb/pkg/memtrim"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/server"
	"github.com/l4lb/l4lb/pkg/splice"
)

// instance is one running configuration: pools, listeners, admin endpoint.
type instance struct {
	log    *slog.Logger
	pipes  *splice.PipePool
	store  *breakerStore
	loops  int
	server *server.Server
	admin  *admin.Server
	access *accesslog.Log     // nil: access log off
	state  *handoff.StateFile // nil: no state_file
	feed   *handoff.Follower  // an upgrade's old process's breaker changes; nil: none
	// takeOver, while an upgrade's new process is not yet the one that
	// serves, lets operators' actions and API reloads through again
	// (serving).
	takeOver func()

	// What a reload replaces (reload.go), under mu.
	mu sync.Mutex
	// cfg is what runs: file, the configuration file last loaded, with
	// the backends discovery found and the API added (members).
	cfg, file *config.Config
	// running holds what runs of the keys a reload does not apply: the
	// start's, and each TCP listener's backlog as its sockets were bound.
	running *config.Config
	pools   []*pool.Pool
	budget  server.FDBudget
	// policies are the listeners' policies by name (a reload keeps a
	// listener's per-source Limiter when its limits are unchanged).
	policies map[string]*relay.Policy
	// config is the running file as the admin endpoint shows it, and the
	// way to reload it (path set: the file reload re-reads).
	config   *admin.ConfigState
	path     string
	reloadMu sync.Mutex

	// members are the discovered and API-added backends (members.go);
	// discovery runs the pools' DNS watchers. started is set once the
	// pools are built (changes before it are start's to use), stopping
	// once stop began (changes after it are dropped).
	members   *membership.Set
	discovery *discoveries
	// fleetBases: which fleet record of API additions members holds,
	// per pool (members.go, shared).
	fleetBases fleetBases
	// stopFleetMembers stops following the fleet's API additions;
	// fleetRuntime follows its drains and weights (nil: no fleet).
	stopFleetMembers func()
	fleetRuntime     *fleetFollower
	started          atomic.Bool
	stopping         atomic.Bool
	// servedMembers is the members' Version the pools were last built
	// from.
	servedMembers atomic.Uint64

	// stopPools stops the running pools' breakers and health checks;
	// stopBackground the rest (memory trimming).
	stopPools      context.CancelFunc
	stopBackground context.CancelFunc
	poolsDone      sync.WaitGroup
}

// start builds everything from cfg and starts serving. On error nothing is
// left running.
func start(cfg *config.Config, log *slog.Logger) (in *instance, err error) {
	return startInherited(cfg, log, handoff.None())
}

// startInherited is start on what this process inherited (pkg/handoff):
// listening sockets served instead of bound, and an upgrade's breaker
// state and health. Inherited sockets nothing takes are closed.
func startInherited(cfg *config.Config, log *slog.Logger, inh *handoff.Inheritance) (in *instance, err error) {
	in = &instance{log: log, cfg: cfg, file: cfg, running: cfg, config: &admin.ConfigState{}, members: membership.New()}
	in.discovery = newDiscoveries(in)
	bg, stopBG := context.WithCancel(context.Background())
	in.stopBackground = stopBG
	defer inh.CloseRest(log)
	defer func() {
		if err != nil {
			in.stop()
		}
	}()

	loops := cfg.Global.EventLoops
	if loops == 0 {
		loops = server.DefaultEventLoops()
	}
	server.ReserveProcs(loops, log)
	in.budget = server.BudgetFor(cfg, loops, cfg.Admin)
	if msg := in.budget.OverLimit(); msg != "" {
		log.Warn(msg, "max_connections", in.budget.MaxConnections, "udp_sessions", in.budget.Sessions,
			"fds_needed", in.budget.Needed(), "fd_limit", in.budget.Limit)
	}
	in.pipes = splice.NewPipePool(splice.PipePoolConfig{
		Size:    cfg.Global.PipeSize,
		MaxOpen: in.budget.MaxPipes,
		MaxIdle: min(32, in.budget.MaxPipes),
	})

	in.store, err = openStore(cfg.Cluster, log)
	if err != nil {
		return in, err
	}
	var own *breaker.MemoryStore // nil: a fleet's, in Redis
	if in.store.fleet != nil {
		in.poolsDone.Go(func() { in.store.fleet.Run(bg) })
	} else {
		own = in.store.store.(*breaker.MemoryStore)
	}
	in.state = handoff.NewStateFile(cfg.Global.StateFile, log)
	var runtime map[string]pool.Runtime
	runtime, in.feed, err = inh.TakeUp(in.state, own, log)
	if err != nil {
		return in, err
	}
	in.loops = loops
	// The backends the API added (kept by the state file, or passed by an
	// upgrade's old process) and those discovery finds: from the old
	// process's last sets, or a first lookup of each pool's own.
	in.state.KeepMembers(in.members)
	inherited, err := inh.Members(in.state, in.members, log)
	if err != nil {
		return in, err
	}
	// A fleet's record of the API's additions replaces the state file's
	// as it arrives (every pool's is announced once at the start).
	in.stopFleetMembers = in.followFleet()
	in.members.Settle(cfg)
	if inherited {
		in.discovery.startFrom(in.members.DiscoveredBackends())
	}
	if started := in.discovery.follow(cfg); !inherited {
		waitFirst(started)
	}
	// The same build step as check, so check accepts nothing run refuses.
	deps := in.poolDeps()
	deps.Runtime = runtime
	served := in.members.Version()
	in.cfg = in.members.Pools(cfg)
	in.pools, err = server.BuildPools(in.cfg, deps, nil, inh.InitialHealth(in.cfg))
	if err != nil && in.cfg != cfg {
		log.Error("the discovered and API-added backends cannot be served; starting with the file's", "error", err)
		in.cfg = cfg
		in.pools, err = server.BuildPools(cfg, deps, nil, inh.InitialHealth(cfg))
	}
	if err != nil {
		return in, err
	}
	cfg = in.cfg
	byName := server.PoolsByName(in.pools)
	if in.store.fleet != nil {
		in.fleetRuntime = newFleetFollower(in.store.fleet, in.livePools, log)
		in.fleetRuntime.start(in.pools)
	}

	in.policies = server.Policies(cfg, nil)
	fronts, err := server.Frontends(cfg, byName, in.policies)
	if err != nil {
		return in, err
	}
	inh.Frontends(fronts, log)
	in.server, err = server.New(server.Config{
		Frontends: fronts, Loops: loops, MaxConnections: in.budget.MaxConnections,
		MaxConnectionsDerived: in.budget.Derived, Pipes: in.pipes,
		IsLocal: server.HostAddrs(), BusyPoll: cfg.Global.BusyPoll, WakeCoalesce: cfg.Global.WakeCoalesce, Logger: log,
		// The inherited sockets no listener took close once this process
		// serves (CloseRest; the old process's copies at its hand-over):
		// a listener moved to an overlapping address binds beside them.
		Own: inh.Sockets.Own(),
	})
	if err != nil {
		handoff.CloseUntaken(fronts)
		return in, err
	}
	if err = in.startAccessLog(cfg.Log, loops); err != nil {
		return in, err
	}

	in.takeOver = inh.RefuseUntilServing(in.config)
	if cfg.Admin.Listen != "" {
		src := admin.Sources{Live: in.livePools, Config: in.config, Server: in.server, Pipes: in.pipes,
			MaxConnections: in.budget.MaxConnections}
		src.Version = buildVersion()
		src.Cluster = in.store.fleet
		src.Membership = apiMembers{in}
		if in.store.fleet != nil {
			src.FleetRuntime = fleetRuntime{in.store.fleet}
		}
		src.Collectors = append(src.Collectors, in.discovery.metrics)
		src.Discovery = in.discovery.status
		src.Syslog = in.syslogOutputs()
		in.config.Reload = in.reloadForAPI
		if ln := inh.AdminListener(cfg.Admin.Listen, log); ln != nil {
			in.admin, err = admin.StartOn(ln, cfg.Admin, src, log)
		} else {
			in.admin, err = admin.Start(cfg.Admin, src, log)
		}
		if err != nil {
			return in, err
		}
	}

	in.runPools(in.pools)
	trim := memtrim.New(log)
	in.poolsDone.Go(func() { trim.Run(bg) })
	in.server.Serve()
	in.servedMembers.Store(served)
	in.started.Store(true)
	if in.members.Version() != served {
		// A lookup answered while the pools were being built.
		in.discovery.changed()
	}
	log.Info("l4lb running", "version", versionString(), "listeners", len(cfg.Listeners), "pools", len(in.pools),
		"max_connections", in.budget.MaxConnections, "udp_sessions", in.budget.Sessions, "fd_limit", in.budget.Limit, "max_pipes", in.budget.MaxPipes)
	return in, nil
}

// shutdown drains: stop accepting, let relays finish until ctx is done,
// close the rest, then stop health checks, breakers and the admin endpoint.
func (in *instance) shutdown(ctx context.Context) error {
	in.stopping.Store(true) // no change of membership rebuilds pools on a server that drains
	var err error
	if in.server != nil {
		err = in.server.Shutdown(ctx)
	}
	in.stop()
	return err
}

// stop ends the background work and releases the listeners.
func (in *instance) stop() {
	// First the watchers: a change they would apply now would rebuild
	// pools on a server going away.
	in.stopping.Store(true)
	if in.stopFleetMembers != nil {
		in.stopFleetMembers()
	}
	in.fleetRuntime.close()
	in.discovery.close()
	if in.server != nil {
		// Releases the addresses of a server that never served (a failed
		// start); after a drain it returns at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		in.server.Shutdown(ctx)
	}
	in.stopAccessLog()
	// A reload under way (the API's) starts its pools before it lets go:
	// wait for it, so they stop too. None after it gets past the server.
	in.reloadMu.Lock()
	in.mu.Lock()
	stopPools := in.stopPools
	in.mu.Unlock()
	in.reloadMu.Unlock()
	if stopPools != nil {
		stopPools()
	}
	if in.stopBackground != nil {
		in.stopBackground()
	}
	in.poolsDone.Wait()
	in.feed.Stop()
	if in.admin != nil {
		in.admin.Close()
	}
}

// poolDeps are the pools' dependencies on this process: the store, and the
// hooks of runtime control (a drain's deadline cuts through the server;
// every change is written to the state file).
func (in *instance) poolDeps() pool.Deps {
	d := in.store.deps(in.log)
	d.CutBackend = func(b *pool.Backend) {
		if in.server != nil {
			in.server.CutBackend(b)
		}
	}
	d.OnRuntimeChange = func() { in.state.Save(in.store.store, in.livePools) }
	return d
}

// serving is called once this process is the one that serves (an
// upgrade's new process has said so to the old one).
func (in *instance) serving() {
	if in.takeOver != nil {
		in.takeOver()
		in.takeOver = nil
	}
}
