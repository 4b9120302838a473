package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxy"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/splice"
)

// instance is one running configuration: pools, listeners, admin endpoint.
type instance struct {
	log    *slog.Logger
	pipes  *splice.PipePool
	store  *breakerStore
	loops  int
	server *proxy.Server
	admin  *admin.Server
	access *accesslog.Log // nil: access log off
	state  *stateFile     // nil: no state_file
	feed   *feedFollower  // an upgrade's old process's breaker changes; nil: none
	// takeOver, while an upgrade's new process is not yet the one that
	// serves, lets operators' actions and API reloads through again
	// (serving); nil otherwise.
	takeOver func()

	// What a reload replaces (reload.go), under mu.
	mu  sync.Mutex
	cfg *config.Config
	// running holds what runs of the keys a reload does not apply: the
	// start's, and each TCP listener's backlog as its sockets were bound.
	running *config.Config
	pools   []*pool.Pool
	budget  fdBudget
	// policies are the listeners' policies by name (a reload keeps a
	// listener's per-source Limiter when its limits are unchanged).
	policies map[string]*relay.Policy
	// config is the running file as the admin endpoint shows it, and the
	// way to reload it (path set: the file reload re-reads).
	config   *admin.ConfigState
	path     string
	reloadMu sync.Mutex

	// stopPools stops the running pools' breakers and health checks;
	// stopBackground the rest (memory trimming).
	stopPools      context.CancelFunc
	stopBackground context.CancelFunc
	poolsDone      sync.WaitGroup
}

// start builds everything from cfg and starts serving. On error nothing is
// left running.
func start(cfg *config.Config, log *slog.Logger) (in *instance, err error) {
	return startInherited(cfg, log, noInheritance())
}

// startInherited is start on what this process inherited (inherit.go):
// listening sockets served instead of bound, and an upgrade's breaker
// state and health. Inherited sockets nothing takes are closed.
func startInherited(cfg *config.Config, log *slog.Logger, inh *inheritance) (in *instance, err error) {
	in = &instance{log: log, cfg: cfg, running: cfg, config: &admin.ConfigState{}}
	bg, stopBG := context.WithCancel(context.Background())
	in.stopBackground = stopBG
	defer inh.closeRest(log)
	defer func() {
		if err != nil {
			in.stop()
		}
	}()

	loops := cfg.Global.EventLoops
	if loops == 0 {
		loops = defaultEventLoops()
	}
	reserveProcs(loops, log)
	backends := 0
	for _, p := range cfg.Pools {
		backends += len(p.Backends)
	}
	in.budget = deriveBudget(nofileLimit(), cfg.Global.MaxConnections, loops*len(cfg.Listeners), backends, adminConns(cfg.Admin), udpSessions(cfg))
	if msg := in.budget.overLimit(); msg != "" {
		log.Warn(msg, "max_connections", in.budget.MaxConnections, "udp_sessions", in.budget.Sessions,
			"fds_needed", in.budget.needed(), "fd_limit", in.budget.Limit)
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
	if in.store.fleet != nil {
		in.poolsDone.Go(func() { in.store.fleet.Run(bg) })
	} else {
		// A fleet's state is in Redis; only the process's own store is
		// handed over by an upgrade.
		in.feed = inh.restoreStore(in.store.store.(*breaker.MemoryStore), log)
	}
	in.state = newStateFile(cfg.Global.StateFile, log)
	runtime, disabled, err := in.state.load()
	if err != nil {
		return in, err
	}
	if rt := inh.runtime(); rt != nil {
		// The old process's live drains and weights: fresher than any
		// state file, and there without one.
		runtime = rt
	}
	if in.store.fleet == nil {
		restoreDisables(in.store.store, disabled, log)
	}
	in.loops = loops
	// The same build step as check, so check accepts nothing run refuses.
	deps := in.poolDeps()
	deps.Runtime = runtime
	in.pools, err = buildPools(cfg, deps, nil, inh.initialHealth(cfg))
	if err != nil {
		return in, err
	}
	byName := map[string]*pool.Pool{}
	for _, p := range in.pools {
		byName[p.Name] = p
	}

	in.policies = policies(cfg, nil)
	fronts := frontends(cfg, byName, in.policies)
	inh.frontends(fronts, log)
	in.server, err = proxy.New(proxy.Config{
		Frontends: fronts, Loops: loops, MaxConnections: in.budget.MaxConnections, Pipes: in.pipes,
		IsLocal: hostAddrs(), BusyPoll: cfg.Global.BusyPoll, WakeCoalesce: cfg.Global.WakeCoalesce, Logger: log,
		// The inherited sockets no listener took close once this process
		// serves (closeRest; the old process's copies at its hand-over):
		// a listener moved to an overlapping address binds beside them.
		Own: inh.sockets.Own(),
	})
	if err != nil {
		closeUntaken(fronts)
		return in, err
	}
	if err = in.startAccessLog(cfg.Log, loops); err != nil {
		return in, err
	}

	if inh.from == "upgrade" {
		// The admin socket is the old process's too, so requests reach
		// this one from the moment it listens: an action or a reload
		// taken before the old process hands over would be lost if the
		// upgrade then fails.
		why := fmt.Sprintf("this process is taking over from pid %d and acts once it serves (act again in a moment)", inh.parent)
		allowActions, allowReloads := in.config.RefuseActions(why), in.config.RefuseReloads(why)
		in.takeOver = func() { allowActions(); allowReloads() }
	}
	if cfg.Admin.Listen != "" {
		src := admin.Sources{Live: in.livePools, Config: in.config, Server: in.server, Pipes: in.pipes,
			MaxConnections: in.budget.MaxConnections}
		src.Version = buildVersion()
		src.Cluster = in.store.fleet
		in.config.Reload = in.reloadForAPI
		if ln := inh.adminListener(cfg.Admin.Listen, log); ln != nil {
			in.admin, err = admin.StartOn(ln, cfg.Admin, src, log)
		} else {
			in.admin, err = admin.Start(cfg.Admin, src, log)
		}
		if err != nil {
			return in, err
		}
	}

	in.runPools(in.pools)
	trim := newMemoryTrimmer(log)
	in.poolsDone.Go(func() { trim.run(bg) })
	in.server.Serve()
	log.Info("l4lb running", "version", versionString(), "listeners", len(cfg.Listeners), "pools", len(in.pools),
		"max_connections", in.budget.MaxConnections, "udp_sessions", in.budget.Sessions, "fd_limit", in.budget.Limit, "max_pipes", in.budget.MaxPipes)
	return in, nil
}

// shutdown drains: stop accepting, let relays finish until ctx is done,
// close the rest, then stop health checks, breakers and the admin endpoint.
func (in *instance) shutdown(ctx context.Context) error {
	var err error
	if in.server != nil {
		err = in.server.Shutdown(ctx)
	}
	in.stop()
	return err
}

// stop ends the background work and releases the listeners.
func (in *instance) stop() {
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
	in.feed.stop()
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
	d.OnRuntimeChange = func() { in.state.save(in.store.store, in.livePools) }
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
