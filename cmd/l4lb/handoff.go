package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The upgrade's state document: what the running process hands the one
// replacing it besides its sockets (breaker state, manual disables,
// health, operators' drains and weights), written to a pipe the new
// process reads at start. JSON, so an operator can read it; versioned,
// because the two processes are two builds: a reader takes its own
// version and the older ones it knows (version 1 had no drains and
// weights), and refuses a newer one (and any key it does not know) with a
// clear error; the new process then starts fresh, with a warning, rather
// than refusing to serve.
const (
	handoffFormat  = "l4lb-upgrade-state"
	handoffVersion = 2
	// handoffMaxBytes bounds what a reader takes: a pipe that never ends
	// must not stall or exhaust the new process.
	handoffMaxBytes = 64 << 20
)

type handoffState struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// FromPID and FromVersion say who wrote it, for the log.
	FromPID     int    `json:"from_pid"`
	FromVersion string `json:"from_version"`
	// Breaker is the breaker Store (breaker.MemorySnapshot): generations,
	// open entries with their cooldown as time remaining when written,
	// manual disables; keys are "pool/identity".
	Breaker []handoffBreaker `json:"breaker"`
	// Health is each backend's health by pool and identity, with the
	// address it was checked at.
	Health []handoffHealth `json:"health"`
	// Runtime is what operators changed at run time (admin API drains and
	// weights) by pool and identity; backends with nothing changed are
	// left out. Version 2 on; what the state file keeps too, so a drained
	// backend stays out across an upgrade with or without state_file.
	Runtime []handoffRuntime `json:"runtime"`
}

type handoffRuntime struct {
	Pool    string `json:"pool"`
	Backend string `json:"backend"` // identity: id, else addr
	// Weight is the weight set at run time, valid while the file still
	// configures ConfiguredWeight (as in the state file).
	Weight           *int `json:"weight,omitempty"`
	ConfiguredWeight int  `json:"configured_weight"`
	Drained          bool `json:"drained,omitempty"`
}

type handoffBreaker struct {
	Key        string `json:"key"`
	Generation uint64 `json:"generation"`
	Open       bool   `json:"open,omitempty"`
	// Durations as Go writes them ("29.5s"): time remaining, never a
	// timestamp (rule 7: no two clocks are compared).
	Cooldown     string `json:"cooldown,omitempty"`
	CooldownLeft string `json:"cooldown_left,omitempty"`
	Disabled     bool   `json:"disabled,omitempty"`
}

type handoffHealth struct {
	Pool    string `json:"pool"`
	Backend string `json:"backend"` // identity: id, else addr
	Addr    string `json:"addr"`
	Up      bool   `json:"up"`
}

// captureHandoff reads the state to hand over from the running pools and
// breaker store.
func captureHandoff(store *breaker.MemoryStore, pools []*pool.Pool) *handoffState {
	st := &handoffState{Format: handoffFormat, Version: handoffVersion, FromPID: pid(), FromVersion: versionString()}
	if store != nil {
		for _, e := range store.Snapshot().Entries {
			st.Breaker = append(st.Breaker, handoffBreakerOf(e.Key, breaker.State{Generation: e.Generation,
				Open: e.Open, Cooldown: e.Cooldown, CooldownLeft: e.CooldownLeft, Disabled: e.Disabled}))
		}
	}
	st.Runtime = []handoffRuntime{}
	for _, p := range pools {
		for _, b := range p.Backends() {
			st.Health = append(st.Health, handoffHealth{Pool: p.Name, Backend: b.ID, Addr: b.Addr, Up: b.HealthUp()})
		}
		rts := p.RuntimeStates()
		for _, id := range slices.Sorted(maps.Keys(rts)) {
			rt := rts[id]
			st.Runtime = append(st.Runtime, handoffRuntime{Pool: p.Name, Backend: id,
				Weight: rt.Weight, ConfiguredWeight: rt.ConfiguredWeight, Drained: rt.Drained})
		}
	}
	return st
}

// handoffBreakerOf is key's state as the document (and the breaker feed)
// writes it.
func handoffBreakerOf(key string, s breaker.State) handoffBreaker {
	b := handoffBreaker{Key: key, Generation: s.Generation, Open: s.Open, Disabled: s.Disabled}
	if s.Open {
		b.Cooldown, b.CooldownLeft = s.Cooldown.String(), s.CooldownLeft.String()
	}
	return b
}

func (st *handoffState) encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(st)
}

// decodeHandoff reads a state document, refusing anything but this
// build's format and version.
func decodeHandoff(r io.Reader) (*handoffState, error) {
	data, err := io.ReadAll(io.LimitReader(r, handoffMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("upgrade state: read: %w", err)
	}
	if len(data) > handoffMaxBytes {
		return nil, fmt.Errorf("upgrade state: larger than %d bytes", handoffMaxBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("upgrade state: empty (the old process wrote nothing)")
	}
	// The header first, alone: a document of another version may not
	// decode as this one, and its version is the error to report.
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("upgrade state: not a JSON document: %w", err)
	}
	if head.Format != handoffFormat {
		return nil, fmt.Errorf("upgrade state: format %q, want %q", head.Format, handoffFormat)
	}
	if head.Version < 1 || head.Version > handoffVersion {
		return nil, fmt.Errorf("upgrade state: version %d, and this l4lb reads versions 1 to %d", head.Version, handoffVersion)
	}
	var st handoffState
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("upgrade state: version %d: %w", head.Version, err)
	}
	if head.Version < 2 && st.Runtime != nil {
		return nil, fmt.Errorf("upgrade state: version %d has no runtime", head.Version)
	}
	if _, err := st.breakerSnapshot(); err != nil {
		return nil, err
	}
	seen := map[[2]string]bool{}
	for _, h := range st.Health {
		if h.Pool == "" || h.Backend == "" {
			return nil, fmt.Errorf("upgrade state: a health entry without pool or backend: %+v", h)
		}
		k := [2]string{h.Pool, h.Backend}
		if seen[k] {
			return nil, fmt.Errorf("upgrade state: health of %s/%s twice", h.Pool, h.Backend)
		}
		seen[k] = true
	}
	clear(seen)
	for _, r := range st.Runtime {
		if r.Pool == "" || r.Backend == "" {
			return nil, fmt.Errorf("upgrade state: a runtime entry without pool or backend: %+v", r)
		}
		k := [2]string{r.Pool, r.Backend}
		if seen[k] {
			return nil, fmt.Errorf("upgrade state: runtime of %s/%s twice", r.Pool, r.Backend)
		}
		seen[k] = true
	}
	return &st, nil
}

// runtime is the operators' drains and weights by "pool/identity"
// (pool.Deps.Runtime); nil when the old process sent none (version 1),
// so the state file's apply.
func (st *handoffState) runtime() map[string]pool.Runtime {
	if st == nil || st.Runtime == nil {
		return nil
	}
	out := make(map[string]pool.Runtime, len(st.Runtime))
	for _, r := range st.Runtime {
		out[r.Pool+"/"+r.Backend] = pool.Runtime{Weight: r.Weight, ConfiguredWeight: r.ConfiguredWeight, Drained: r.Drained}
	}
	return out
}

// breakerSnapshot is the Breaker list as a MemorySnapshot, validated.
func (st *handoffState) breakerSnapshot() (breaker.MemorySnapshot, error) {
	var snap breaker.MemorySnapshot
	for _, b := range st.Breaker {
		e := breaker.SnapshotEntry{Key: b.Key, Generation: b.Generation, Open: b.Open, Disabled: b.Disabled}
		for _, d := range []struct {
			name string
			s    string
			to   *time.Duration
		}{{"cooldown", b.Cooldown, &e.Cooldown}, {"cooldown_left", b.CooldownLeft, &e.CooldownLeft}} {
			if d.s == "" {
				continue
			}
			v, err := time.ParseDuration(d.s)
			if err != nil {
				return snap, fmt.Errorf("upgrade state: breaker %s: %s: %w", b.Key, d.name, err)
			}
			*d.to = v
		}
		snap.Entries = append(snap.Entries, e)
	}
	if err := snap.Validate(); err != nil {
		return snap, fmt.Errorf("upgrade state: %w", err)
	}
	return snap, nil
}

// restore loads the breaker state into a fresh store.
func (st *handoffState) restore(store *breaker.MemoryStore) error {
	snap, err := st.breakerSnapshot()
	if err != nil {
		return err
	}
	return store.Restore(snap)
}

// initialHealth is, for each pool of cfg, the health its backends start
// with (pool.Deps.InitialHealth): what the old process saw for a backend
// of the same identity at the same address; a backend whose identity
// moved to another address starts down, to be checked before use, as a
// reload does; one the old process did not have is absent (up, as at any
// start).
func (st *handoffState) initialHealth(cfg *config.Config) map[string]map[string]bool {
	if st == nil {
		return nil
	}
	type seen struct {
		addr string
		up   bool
	}
	old := map[[2]string]seen{}
	for _, h := range st.Health {
		old[[2]string{h.Pool, h.Backend}] = seen{h.Addr, h.Up}
	}
	out := map[string]map[string]bool{}
	for _, name := range cfg.PoolNames {
		for _, bc := range cfg.Pools[name].Backends {
			h, ok := old[[2]string{name, bc.Identity()}]
			if !ok {
				continue
			}
			if out[name] == nil {
				out[name] = map[string]bool{}
			}
			out[name][bc.Identity()] = h.up && h.addr == bc.Addr
		}
	}
	return out
}
