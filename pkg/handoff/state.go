package handoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/membership"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The upgrade's state document (see the package comment for its contract):
// what the running process hands the one replacing it besides its sockets
// (breaker state, manual disables, health, operators' drains and weights).
// JSON, so an operator can read it; versioned, because the two processes
// are two builds.
const (
	docFormat  = "l4lb-upgrade-state"
	docVersion = 4
	// docMaxBytes bounds what a reader takes: a pipe that never ends
	// must not stall or exhaust the new process.
	docMaxBytes = 64 << 20
)

// State is the state document.
type State struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// FromPID and FromVersion say who wrote it, for the log.
	FromPID     int    `json:"from_pid"`
	FromVersion string `json:"from_version"`
	// Breaker is the breaker Store (breaker.MemorySnapshot): generations,
	// open entries with their cooldown as time remaining when written,
	// manual disables; keys are "pool/identity".
	Breaker []BreakerEntry `json:"breaker"`
	// Health is each backend's health by pool and identity, with the
	// address it was checked at.
	Health []HealthEntry `json:"health"`
	// Runtime is what operators changed at run time (admin API drains and
	// weights) by pool and identity; backends with nothing changed are
	// left out. Version 2 on; what the state file keeps too, so a drained
	// backend stays out across an upgrade with or without state_file.
	Runtime []RuntimeEntry `json:"runtime"`
	// Members are the backends the admin API added and those discovery
	// found, by pool, so the new process serves (and adopts connections
	// to) every backend the old one did. Version 3 on; nil: none.
	Members *Members `json:"members,omitempty"`
}

// Members are the pools' backends that are not the file's.
type Members struct {
	Added      map[string][]membership.Added `json:"added,omitempty"`
	Discovered map[string][]DiscoveredEntry  `json:"discovered,omitempty"`
}

// DiscoveredEntry is one discovered backend.
type DiscoveredEntry struct {
	Addr           string `json:"addr"`
	Weight         int    `json:"weight"`
	MaxConnections int    `json:"max_connections,omitempty"`
	Backup         bool   `json:"backup,omitempty"`
}

// setMembers records set's backends in the document. A process with none
// writes version 2, which the build before members reads too: a rollback
// to it keeps the breakers, disables, drains and weights.
func (st *State) setMembers(set *membership.Set) {
	st.Members = captureMembers(set)
	st.Version = st.lowestVersion()
}

// captureMembers is the document's record of set; nil when it has none.
func captureMembers(set *membership.Set) *Members {
	if set == nil || len(set.AddedBackends())+len(set.DiscoveredBackends()) == 0 {
		return nil
	}
	m := &Members{Added: set.AddedBackends(), Discovered: map[string][]DiscoveredEntry{}}
	for name, bs := range set.DiscoveredBackends() {
		for _, b := range bs {
			m.Discovered[name] = append(m.Discovered[name], DiscoveredEntry{Addr: b.Addr, Weight: b.Weight,
				MaxConnections: b.MaxConnections, Backup: b.Backup})
		}
	}
	return m
}

// RestoreMembers puts the old process's API-added backends into set, and
// its discovered ones when discovered is set; it reports whether the
// document had discovered sets (so the new process need not wait for its
// first lookups).
func (st *State) RestoreMembers(set *membership.Set) (discovered bool) {
	if st == nil || st.Members == nil {
		return false
	}
	set.Restore(st.Members.Added)
	sets := map[string][]config.Backend{}
	for name, es := range st.Members.Discovered {
		for _, e := range es {
			b := config.DefaultBackend()
			b.Addr, b.Weight, b.MaxConnections, b.Backup = e.Addr, e.Weight, e.MaxConnections, e.Backup
			sets[name] = append(sets[name], b)
		}
	}
	set.RestoreDiscovered(sets)
	return len(sets) > 0
}

// RuntimeEntry is one backend's run-time changes.
type RuntimeEntry struct {
	Pool    string `json:"pool"`
	Backend string `json:"backend"` // identity: id, else addr
	// Weight is the weight set at run time, valid while the file still
	// configures ConfiguredWeight (as in the state file).
	Weight           *int `json:"weight,omitempty"`
	ConfiguredWeight int  `json:"configured_weight"`
	Drained          bool `json:"drained,omitempty"`
	// DrainSince and DrainDeadline are a drain's times (wall clock), so
	// its deadline holds in the new process. Version 4 on.
	DrainSince    time.Time `json:"drain_since,omitzero"`
	DrainDeadline time.Time `json:"drain_deadline,omitzero"`
}

// BreakerEntry is one breaker key's state, in the document and on the feed.
type BreakerEntry struct {
	Key        string `json:"key"`
	Generation uint64 `json:"generation"`
	Open       bool   `json:"open,omitempty"`
	// Durations as Go writes them ("29.5s"): time remaining, never a
	// timestamp (rule 7: no two clocks are compared).
	Cooldown     string `json:"cooldown,omitempty"`
	CooldownLeft string `json:"cooldown_left,omitempty"`
	Disabled     bool   `json:"disabled,omitempty"`
}

// HealthEntry is one backend's health.
type HealthEntry struct {
	Pool    string `json:"pool"`
	Backend string `json:"backend"` // identity: id, else addr
	Addr    string `json:"addr"`
	Up      bool   `json:"up"`
}

// Capture reads the state to hand over from the running pools and
// breaker store (nil: a fleet's, not handed over); version is this
// build's, for the reader's log.
func Capture(store *breaker.MemoryStore, pools []*pool.Pool, version string) *State {
	st := &State{Format: docFormat, Version: docVersion, FromPID: os.Getpid(), FromVersion: version}
	if store != nil {
		for _, e := range store.Snapshot().Entries {
			st.Breaker = append(st.Breaker, breakerEntryOf(e.Key, breaker.State{Generation: e.Generation,
				Open: e.Open, Cooldown: e.Cooldown, CooldownLeft: e.CooldownLeft, Disabled: e.Disabled}))
		}
	}
	st.Runtime = []RuntimeEntry{}
	for _, p := range pools {
		for _, b := range p.Backends() {
			st.Health = append(st.Health, HealthEntry{Pool: p.Name, Backend: b.ID, Addr: b.Addr, Up: b.HealthUp()})
		}
		rts := p.RuntimeStates()
		for _, id := range slices.Sorted(maps.Keys(rts)) {
			rt := rts[id]
			st.Runtime = append(st.Runtime, RuntimeEntry{Pool: p.Name, Backend: id,
				Weight: rt.Weight, ConfiguredWeight: rt.ConfiguredWeight, Drained: rt.Drained,
				DrainSince: rt.DrainSince, DrainDeadline: rt.DrainDeadline})
		}
	}
	st.Version = st.lowestVersion()
	return st
}

// lowestVersion is the oldest version that holds what st holds, which
// the document is written as, so that a rollback to the build before
// reads it as long as nothing newer is in it: 4 with a drain's times, 3
// with members, else 2.
func (st *State) lowestVersion() int {
	switch {
	case st.hasDrainTimes():
		return 4
	case st.Members != nil:
		return 3
	}
	return 2
}

func (st *State) hasDrainTimes() bool {
	return slices.ContainsFunc(st.Runtime, func(r RuntimeEntry) bool { return !r.DrainSince.IsZero() || !r.DrainDeadline.IsZero() })
}

// breakerEntryOf is key's state as the document (and the breaker feed)
// writes it.
func breakerEntryOf(key string, s breaker.State) BreakerEntry {
	b := BreakerEntry{Key: key, Generation: s.Generation, Open: s.Open, Disabled: s.Disabled}
	if s.Open {
		b.Cooldown, b.CooldownLeft = s.Cooldown.String(), s.CooldownLeft.String()
	}
	return b
}

// Encode writes the document as one JSON line.
func (st *State) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(st)
}

// Decode reads a state document, refusing another format, a newer
// version, and any key it does not know.
func Decode(r io.Reader) (*State, error) {
	data, err := io.ReadAll(io.LimitReader(r, docMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("upgrade state: read: %w", err)
	}
	if len(data) > docMaxBytes {
		return nil, fmt.Errorf("upgrade state: larger than %d bytes", docMaxBytes)
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
	if head.Format != docFormat {
		return nil, fmt.Errorf("upgrade state: format %q, want %q", head.Format, docFormat)
	}
	if head.Version < 1 || head.Version > docVersion {
		return nil, fmt.Errorf("upgrade state: version %d, and this l4lb reads versions 1 to %d", head.Version, docVersion)
	}
	var st State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("upgrade state: version %d: %w", head.Version, err)
	}
	if head.Version < 2 && st.Runtime != nil {
		return nil, fmt.Errorf("upgrade state: version %d has no runtime", head.Version)
	}
	if head.Version < 3 && st.Members != nil {
		return nil, fmt.Errorf("upgrade state: version %d has no members", head.Version)
	}
	if head.Version < 4 && st.hasDrainTimes() {
		return nil, fmt.Errorf("upgrade state: version %d has no drain times", head.Version)
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

// RuntimeByKey is the operators' drains and weights by "pool/identity"
// (pool.Deps.Runtime); nil when the old process sent none (version 1),
// so the state file's apply.
func (st *State) RuntimeByKey() map[string]pool.Runtime {
	if st == nil || st.Runtime == nil {
		return nil
	}
	out := make(map[string]pool.Runtime, len(st.Runtime))
	for _, r := range st.Runtime {
		out[r.Pool+"/"+r.Backend] = pool.Runtime{Weight: r.Weight, ConfiguredWeight: r.ConfiguredWeight, Drained: r.Drained,
			DrainSince: r.DrainSince, DrainDeadline: r.DrainDeadline}
	}
	return out
}

// breakerSnapshot is the Breaker list as a MemorySnapshot, validated.
func (st *State) breakerSnapshot() (breaker.MemorySnapshot, error) {
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

// Restore loads the breaker state into a fresh store.
func (st *State) Restore(store *breaker.MemoryStore) error {
	snap, err := st.breakerSnapshot()
	if err != nil {
		return err
	}
	return store.Restore(snap)
}

// InitialHealth is, for each pool of cfg, the health its backends start
// with (pool.Deps.InitialHealth): what the old process saw for a backend
// of the same identity at the same address; a backend whose identity
// moved to another address starts down, to be checked before use, as a
// reload does; one the old process did not have is absent (up, as at any
// start).
func (st *State) InitialHealth(cfg *config.Config) map[string]map[string]bool {
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
