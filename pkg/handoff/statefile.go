package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/membership"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The state file ([global] state_file) keeps what an operator changed at
// run time across restarts: manual disables (with the process's own
// store; a fleet keeps them in Redis), drains and weights (this
// instance's own: a fleet's are in Redis too, pool.RuntimeStates). It is rewritten
// whole, through a temporary file and a rename, after every change, so a
// crash leaves the old file or the new one, never half of one.

const stateFormat = "l4lb-state"

// stateDoc is the file's content.
type stateDoc struct {
	Format   string                         `json:"format"`
	Version  int                            `json:"version"`
	Disabled []string                       `json:"disabled"` // breaker keys: "pool/identity"
	Backends map[string]map[string]stateRun `json:"backends"` // pool -> identity -> changes
	// Added are the backends the admin API added, by pool (pkg/membership);
	// left out when there are none, so older builds read the file as
	// before (and drop them).
	Added map[string][]membership.Added `json:"added,omitempty"`
}

type stateRun struct {
	Weight           *int `json:"weight,omitempty"`
	ConfiguredWeight int  `json:"configured_weight"`
	Drained          bool `json:"drained,omitempty"`
	// A drain's times, so its deadline holds across a restart; left out
	// of older files (the drain then counts from the start, its deadline
	// passed), and older builds ignore them.
	DrainSince    time.Time `json:"drain_since,omitzero"`
	DrainDeadline time.Time `json:"drain_deadline,omitzero"`
}

// StateFile writes and reads one state file; a nil *StateFile (no
// state_file) does nothing.
type StateFile struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
	// added, when set, gives the API's additions each Save writes.
	added func() map[string][]membership.Added
}

// KeepMembers makes every Save write the API's additions from set too.
func (sf *StateFile) KeepMembers(set *membership.Set) {
	if sf != nil {
		sf.added = set.AddedBackends
	}
}

// LoadMembers reads the API's additions the file keeps; none without a
// file.
func (sf *StateFile) LoadMembers() (map[string][]membership.Added, error) {
	if sf == nil {
		return nil, nil
	}
	b, err := os.ReadFile(sf.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state_file %s: %w", sf.path, err)
	}
	var doc stateDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("state_file %s: %w", sf.path, err)
	}
	return doc.Added, nil
}

// NewStateFile is the state file at path; nil when path is "".
func NewStateFile(path string, log *slog.Logger) *StateFile {
	if path == "" {
		return nil
	}
	return &StateFile{path: path, log: log}
}

// Load reads the file: the runtime changes by "pool/identity" and the
// disabled keys. A missing file is an empty state; a file that cannot be
// read or parsed is an error naming it (start refuses to guess).
func (sf *StateFile) Load() (map[string]pool.Runtime, []string, error) {
	if sf == nil {
		return nil, nil, nil
	}
	b, err := os.ReadFile(sf.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("state_file %s: %w", sf.path, err)
	}
	var doc stateDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("state_file %s: %w", sf.path, err)
	}
	if doc.Format != stateFormat || doc.Version != 1 {
		return nil, nil, fmt.Errorf("state_file %s: format %q version %d, want %q version 1", sf.path, doc.Format, doc.Version, stateFormat)
	}
	rt := map[string]pool.Runtime{}
	for p, bs := range doc.Backends {
		for id, r := range bs {
			rt[p+"/"+id] = pool.Runtime{Weight: r.Weight, ConfiguredWeight: r.ConfiguredWeight, Drained: r.Drained,
				DrainSince: r.DrainSince, DrainDeadline: r.DrainDeadline}
		}
	}
	return rt, doc.Disabled, nil
}

// Save writes the state of the pools live() returns (and the disables of
// store, when it is the process's own) as the file's new content.
func (sf *StateFile) Save(store breaker.Store, live func() []*pool.Pool) {
	if sf == nil {
		return
	}
	// The picture is taken under the lock too: a save that read the pools
	// before another's change must not write after it.
	sf.mu.Lock()
	defer sf.mu.Unlock()
	doc := stateDoc{Format: stateFormat, Version: 1, Disabled: []string{}, Backends: map[string]map[string]stateRun{}}
	if ms, ok := store.(*breaker.MemoryStore); ok {
		for _, e := range ms.Snapshot().Entries {
			if e.Disabled {
				doc.Disabled = append(doc.Disabled, e.Key)
			}
		}
		sort.Strings(doc.Disabled)
	}
	for _, p := range live() {
		for id, r := range p.RuntimeStates() {
			if doc.Backends[p.Name] == nil {
				doc.Backends[p.Name] = map[string]stateRun{}
			}
			doc.Backends[p.Name][id] = stateRun{Weight: r.Weight, ConfiguredWeight: r.ConfiguredWeight, Drained: r.Drained,
				DrainSince: r.DrainSince, DrainDeadline: r.DrainDeadline}
		}
	}
	if sf.added != nil {
		if added := sf.added(); len(added) > 0 {
			doc.Added = added
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		sf.log.Error("state_file not written", "path", sf.path, "error", err)
		return
	}
	if err := writeAtomic(sf.path, append(b, '\n')); err != nil {
		sf.log.Error("state_file not written: runtime changes will not survive a restart", "path", sf.path, "error", err)
	}
}

// writeAtomic replaces path with data: a temporary file beside it, synced,
// renamed over it, and the directory synced, since the rename is an entry
// of the directory: without its fsync a crash (power, kernel) after save
// returned can bring back the old file, or none.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o640); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs the directory dir; a variable so that a test sees it
// called after the rename.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// restoreDisables sets the kept manual disables in a fresh store.
func restoreDisables(store breaker.Store, keys []string, log *slog.Logger) {
	for _, k := range keys {
		if err := store.Disable(context.Background(), k); err != nil {
			log.Warn("state_file: disable not restored", "key", k, "error", err)
		}
	}
	if len(keys) > 0 {
		log.Info("state_file: manual disables restored", "backends", len(keys))
	}
}
