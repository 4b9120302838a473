package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/fleet"
	"github.com/l4lb/l4lb/pkg/health"
	"github.com/l4lb/l4lb/pkg/pool"
)

// breakerStore is where the breakers of this process keep their state:
// the process's own MemoryStore, or with [cluster] store = "redis" the
// fleet's Store (whose Run the caller starts).
type breakerStore struct {
	store breaker.Store
	// checks runs every pool's health checks, one scheduler for the life
	// of the process (reloads included).
	checks *health.Scheduler
	fleet  *fleet.Store // nil: memory
	owner  string       // probe-lock token: this instance, unique per process
}

// openStore opens [cluster]'s store. A Redis that does not answer is no
// error (the fleet Store decides locally until it does); options that can
// never work are.
func openStore(c config.Cluster, log *slog.Logger) (*breakerStore, error) {
	if c.Store != config.StoreRedis {
		return &breakerStore{store: breaker.NewMemoryStore(nil), checks: health.NewScheduler(0)}, nil
	}
	name := instanceName(c)
	fc := fleetConfig(c, name)
	fc.Voter = voterName(c)
	fs, err := fleet.New(fc, fleet.Options{Logger: log.With("component", "cluster", "instance", name), CheckMembers: checkFleetMembers})
	if err != nil {
		return nil, err
	}
	// The instance name may be shared by mistake (a copied file): the
	// token must still be this process's alone, or two probers would
	// release each other's lock.
	var buf [4]byte
	_, _ = rand.Read(buf[:])
	return &breakerStore{store: fs, fleet: fs, owner: name + "/" + hex.EncodeToString(buf[:]), checks: health.NewScheduler(0)}, nil
}

// fleetConfig is [cluster] as the fleet package takes it.
func fleetConfig(c config.Cluster, instance string) fleet.Config {
	return fleet.Config{
		RedisURL: c.RedisURL, PasswordFile: c.PasswordFile,
		TLSCAFile: c.TLSCAFile, TLSCertFile: c.TLSCertFile, TLSKeyFile: c.TLSKeyFile, TLSServerName: c.TLSServerName,
		SentinelMaster: c.SentinelMaster, SentinelAddrs: c.SentinelAddrs, RedisAddrs: c.RedisAddrs,
		KeyPrefix: c.KeyPrefix, SyncInterval: c.SyncInterval, Timeout: c.Timeout,
		Instance: instance, TripQuorum: c.TripQuorum,
	}
}

// instanceName is [cluster] instance, or hostname-pid.
func instanceName(c config.Cluster) string {
	if c.Instance != "" {
		return c.Instance
	}
	return fmt.Sprintf("%s-%d", hostName(), os.Getpid())
}

// voterName is the name this instance votes under towards trip_quorum:
// [cluster] instance, or the host name. Not the pid, which
// instanceName adds: an upgrade's new process (or a restart) within a
// breaker window would vote again under a new name, and one host's two
// votes would make a quorum of two by themselves. Two processes on one
// host vote as one, which errs towards fewer fleet-wide trips.
func voterName(c config.Cluster) string {
	if c.Instance != "" {
		return c.Instance
	}
	return hostName()
}

// hostName is the host's name, or "l4lb" when it has none.
func hostName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "l4lb"
	}
	return host
}

// deps are the pool dependencies that come from the store.
func (bs *breakerStore) deps(log *slog.Logger) pool.Deps {
	return pool.Deps{Store: bs.store, Logger: log, RemoteStore: bs.fleet != nil, Owner: bs.owner, HealthChecks: bs.checks}
}
