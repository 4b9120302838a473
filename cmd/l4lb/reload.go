package main

import (
	"context"
	"os"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/sdnotify"
	"github.com/l4lb/l4lb/pkg/server"
)

// Reloading the configuration in place: SIGHUP, `systemctl reload` (which
// sends it) and POST /api/v1/reload all come here. The new file is parsed,
// checked and built aside; any error leaves the running configuration as
// it is. Otherwise listeners and pools are swapped while serving
// (server.Server.Reload, pool.Deps.Previous).

// useFile tells the instance which file it runs, for reloads.
func (in *instance) useFile(path string) {
	in.path = path
	if data, err := os.ReadFile(path); err == nil {
		in.config.Loaded(server.FileHash(data), time.Now())
	}
}

// shutdownTimeout is the running configuration's (a reload may change it).
func (in *instance) shutdownTimeout() time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cfg.Global.ShutdownTimeout
}

// upgradeDrainTimeout is the running configuration's.
func (in *instance) upgradeDrainTimeout() time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cfg.Global.UpgradeDrainTimeout
}

// livePools are the pools served now (for the admin endpoint).
func (in *instance) livePools() []*pool.Pool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.pools
}

// runPools starts the breakers and health checks of pools, and stops the
// ones they replace.
func (in *instance) runPools(pools []*pool.Pool) {
	ctx, cancel := context.WithCancel(context.Background())
	for _, p := range pools {
		in.poolsDone.Go(func() { p.Run(ctx) })
	}
	in.mu.Lock()
	old := in.stopPools
	in.stopPools = cancel
	in.mu.Unlock()
	if old != nil {
		old()
	}
}

// reloadForAPI is the admin endpoint's reload.
func (in *instance) reloadForAPI() (any, []string) {
	res, errs := in.reload()
	if len(errs) > 0 {
		return nil, errs
	}
	return res, nil
}

// reload applies the configuration file anew. It returns every error
// (each with its line for file errors) when the running configuration
// stays.
func (in *instance) reload() (server.ReloadResult, []string) {
	in.reloadMu.Lock()
	defer in.reloadMu.Unlock()
	start := time.Now()
	sdnotify.Reloading()
	defer sdnotify.Ready()
	var res server.ReloadResult
	var errs []string
	// Operators' actions on backends wait: made on the pools being
	// replaced, they would be lost.
	in.config.Hold(func() { res, errs = in.apply() })
	in.config.Counted(len(errs) == 0)
	if len(errs) > 0 {
		for _, e := range errs {
			in.log.Error("reload failed: the running configuration stays", "file", in.path, "error", e)
		}
		return res, errs
	}
	for _, w := range res.Warnings {
		in.log.Warn("reload: "+w, "file", in.path)
	}
	msg := "configuration reloaded"
	if res.Changes.None() {
		msg = "configuration reloaded: no listener, pool or backend changed"
	}
	in.log.Info(msg, "file", in.path, "hash", res.Hash[:12], "listeners_kept", res.Kept,
		"listeners_added", res.Added, "listeners_removed", res.Removed, "pools", res.Pools,
		res.Changes.LogAttr(), "took", time.Since(start).Round(time.Microsecond).String())
	return res, nil
}

func (in *instance) apply() (server.ReloadResult, []string) {
	var res server.ReloadResult
	if in.path == "" {
		return res, []string{"no configuration file to reload (l4lb was started without one)"}
	}
	data, err := os.ReadFile(in.path)
	if err != nil {
		return res, []string{err.Error()}
	}
	file, err := config.Parse(in.path, data)
	if err != nil {
		return res, server.ErrorLines(err)
	}
	in.mu.Lock()
	oldCfg := in.cfg
	in.mu.Unlock()
	// The backends discovery found and the API added stay on top of the
	// new file (pkg/membership), but for what the file now names itself.
	unsettle := in.members.Settle(file)
	cfg := in.members.Pools(file)
	st, err := in.serve(cfg)
	if err != nil {
		unsettle()
		return res, server.ErrorLines(err)
	}
	in.mu.Lock()
	in.file = file
	in.mu.Unlock()
	in.discovery.follow(file)
	for _, name := range file.PoolNames {
		if oldCfg.Pools[name] == nil && in.readFleet(name) {
			in.discovery.changed() // a pool back: the fleet's backends of it too
		}
	}
	in.saveMembers()
	hash := server.FileHash(data)
	in.config.Loaded(hash, time.Now())
	res = server.ReloadResult{Result: "ok", Hash: hash, Kept: st.Kept, Added: st.Added, Removed: st.Removed,
		Pools: st.Pools, Warnings: append([]string{}, st.Warnings...), Changes: server.DiffConfigs(oldCfg, cfg)}
	return res, nil
}

// applied is what serve changed.
type applied struct {
	server.ReloadStats
	Pools    int
	Warnings []string
}

// serve makes cfg (a file with its discovered and added backends) the
// running configuration: its pools built aside, each carrying on the one
// of its name, then listeners and pools swapped while serving. An error
// leaves everything as it was. Under reloadMu.
func (in *instance) serve(cfg *config.Config) (applied, error) {
	var res applied
	in.mu.Lock()
	running, oldPools := in.running, in.pools
	in.mu.Unlock()
	res.Warnings = server.NeedsRestart(running, cfg)
	for _, w := range cfg.Advice() {
		res.Warnings = append(res.Warnings, w.Error())
	}

	previous := make(map[string]*pool.Pool, len(oldPools))
	for _, p := range oldPools {
		previous[p.Name] = p
	}
	pools, err := server.BuildPools(cfg, in.poolDeps(), previous, nil)
	if err != nil {
		return res, err
	}
	byName := server.PoolsByName(pools)
	budget := server.BudgetFor(cfg, in.loops, running.Admin)
	pols := server.Policies(cfg, in.policies)
	fronts, err := server.Frontends(cfg, byName, pols)
	if err != nil {
		return res, err
	}
	st, err := in.server.Reload(fronts, budget.ConnCap)
	if err != nil {
		return res, err
	}

	// Serving the new configuration: its pools' checks start (a backend
	// the reload added is down until they pass), the old ones' stop; what
	// still holds an old backend asks its successor whether it is usable.
	for _, p := range oldPools {
		p.HandOver(byName[p.Name])
	}
	in.runPools(pools)
	in.mu.Lock()
	in.cfg, in.pools, in.budget, in.policies = cfg, pools, budget, pols
	in.running = server.StillRunning(running, cfg)
	in.mu.Unlock()
	in.fleetRuntime.follow(pools) // the fleet's drains and weights of backends new here
	res.ReloadStats, res.Pools = st, len(pools)
	return res, nil
}
