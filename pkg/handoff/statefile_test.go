package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The state file's replacement is durable: the directory holding it is
// fsynced after the rename (the rename is an entry of the directory; a
// crash before that sync can bring the old file back), and a failed sync
// is an error, not a silent success.
func TestWriteAtomicSyncsTheDirectoryAfterTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	real := syncDir
	defer func() { syncDir = real }()
	var synced []string
	syncDir = func(d string) error {
		if got, _ := os.ReadFile(path); string(got) != "new" {
			t.Errorf("directory synced before the rename: the file holds %q", got)
		}
		synced = append(synced, d)
		return real(d)
	}
	if err := writeAtomic(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories synced: %q, want [%q]", synced, dir)
	}

	failed := errors.New("EIO")
	syncDir = func(string) error { return failed }
	if err := writeAtomic(path, []byte("newer")); !errors.Is(err, failed) {
		t.Fatalf("a failed directory sync: %v, want it returned", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left beside the state file: %v", entries)
	}
}

// Operators' changes made at the same time (a script draining several
// backends in parallel through the API) all reach the state file: the
// file written last holds every change made before it, never an older
// picture of the pools that lost the race to the lock.
func TestStateFileKeepsEveryConcurrentChange(t *testing.T) {
	const n = 24
	state := filepath.Join(t.TempDir(), "state.json")
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = \"127.0.0.1:8080\"\npool = \"p\"\n")
	fmt.Fprintf(&b, "[pool.p]\n[pool.p.health]\nenabled = false\n")
	for i := range n {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = \"192.0.2.%d:80\"\n", i+1)
	}
	cfg, err := config.Parse("t.toml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	// The pools save to the file at every change, as a serving process's
	// do (its pool.Deps.OnRuntimeChange).
	sf := NewStateFile(state, slog.New(slog.DiscardHandler))
	store := breaker.NewMemoryStore(nil)
	var pools []*pool.Pool
	live := func() []*pool.Pool { return pools }
	pools = newPools(t, cfg, pool.Deps{Store: store, OnRuntimeChange: func() { sf.Save(store, live) }})
	p := pools[0]

	for round := range 5 {
		var wg sync.WaitGroup
		for _, be := range p.Backends() {
			wg.Go(func() {
				if round%2 == 0 {
					p.Drain(context.Background(), be, time.Hour)
				} else {
					p.Enable(context.Background(), be)
				}
			})
		}
		wg.Wait()
		data, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		var doc stateDoc
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		drained := 0
		for id, r := range doc.Backends["p"] {
			if r.Drained {
				drained++
				// The drain's times, so a restart keeps its deadline.
				if r.DrainDeadline.Sub(r.DrainSince) != time.Hour {
					t.Fatalf("round %d: backend %s drained from %v until %v, want its hour-long deadline kept", round, id, r.DrainSince, r.DrainDeadline)
				}
			}
		}
		want := 0
		if round%2 == 0 {
			want = n
		}
		if drained != want {
			t.Fatalf("round %d: every backend is %s, but the state file says %d of %d are drained: a restart would restore an older state",
				round, map[bool]string{true: "drained", false: "enabled"}[want == n], drained, n)
		}
	}
}

// A starting process takes up the state file's disables into its own
// store (a fleet keeps them in Redis) and its drains and weights, unless
// an upgrade's old process sent its live ones: those are fresher.
func TestTakeUpPrefersTheOldProcessesDrains(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"format":"l4lb-state","version":1,"disabled":["p/a"],
"backends":{"p":{"b":{"configured_weight":1,"drained":true}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sf := NewStateFile(path, log)
	upgrade := None()
	upgrade.State = &State{Runtime: []RuntimeEntry{{Pool: "p", Backend: "c", ConfiguredWeight: 1, Drained: true}}}
	for _, tc := range []struct {
		name     string
		inh      *Inheritance
		own      bool // the process's own store, not a fleet's
		drained  string
		disabled bool
	}{
		{"a restart", None(), true, "p/b", true},
		{"an upgrade", upgrade, true, "p/c", true},
		{"a fleet's restart", None(), false, "p/b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := breaker.NewMemoryStore(nil)
			var own *breaker.MemoryStore
			if tc.own {
				own = store
			}
			rt, follower, err := tc.inh.TakeUp(sf, own, log)
			if err != nil || follower != nil {
				t.Fatalf("TakeUp: %v, follower %v", err, follower)
			}
			if len(rt) != 1 || !rt[tc.drained].Drained {
				t.Errorf("runtime %+v, want %s drained only", rt, tc.drained)
			}
			if st, _ := store.Read(ctx, "p/a"); st.Disabled != tc.disabled {
				t.Errorf("p/a disabled: %v, want %v", st.Disabled, tc.disabled)
			}
		})
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := None().TakeUp(sf, nil, log); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("an unreadable state file: %v, want an error naming it", err)
	}
}
