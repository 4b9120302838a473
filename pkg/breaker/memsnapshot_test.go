package breaker

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/l4lb/l4lb/pkg/clock"
)

// A snapshot carries generations, open entries with their time left and
// disables into another store, whose own clock then counts the cooldown
// down from the moment of the restore: the two clocks are never compared,
// even when they are years apart.
func TestMemoryStore_SnapshotRestore(t *testing.T) {
	ctx := context.Background()
	oldClock := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	old := NewMemoryStore(oldClock)
	// "web/a": tripped, then a failed probe re-opened it (generation 2).
	old.Trip(ctx, "web/a", 0, 30*time.Second, 30*time.Second)
	old.Reopen(ctx, "web/a", 1, time.Minute, time.Minute)
	// "web/b": tripped and closed again (generation 2, closed), disabled.
	old.Trip(ctx, "web/b", 0, 30*time.Second, 30*time.Second)
	old.Close(ctx, "web/b", 1)
	old.Disable(ctx, "web/b")
	// "web/c": only disabled. "web/d": never anything (not in the snapshot).
	old.Disable(ctx, "web/c")
	old.Read(ctx, "web/d")
	// A probe lock is the old process's own.
	old.AcquireProbe(ctx, "web/a", "old-owner", 10*time.Second)
	oldClock.Advance(20 * time.Second)

	snap := old.Snapshot()
	want := []SnapshotEntry{
		{Key: "web/a", Generation: 2, Open: true, Cooldown: time.Minute, CooldownLeft: 40 * time.Second},
		{Key: "web/b", Generation: 2, Disabled: true},
		{Key: "web/c", Disabled: true},
	}
	if !reflect.DeepEqual(snap.Entries, want) {
		t.Fatalf("snapshot\n%+v\nwant\n%+v", snap.Entries, want)
	}

	newClock := clock.NewFake(time.Date(1999, 6, 1, 0, 0, 0, 0, time.UTC)) // another clock altogether
	fresh := NewMemoryStore(newClock)
	if err := fresh.Restore(snap); err != nil {
		t.Fatal(err)
	}
	for _, e := range want {
		st, _ := fresh.Read(ctx, e.Key)
		got := SnapshotEntry{Key: e.Key, Generation: st.Generation, Open: st.Open, Cooldown: st.Cooldown,
			CooldownLeft: st.CooldownLeft, Disabled: st.Disabled}
		if got != e {
			t.Errorf("restored %+v, want %+v", got, e)
		}
	}
	newClock.Advance(39 * time.Second)
	if st, _ := fresh.Read(ctx, "web/a"); st.CooldownLeft != time.Second {
		t.Fatalf("39s after the restore: %v of the cooldown left, want 1s", st.CooldownLeft)
	}
	newClock.Advance(2 * time.Second)
	if st, _ := fresh.Read(ctx, "web/a"); !st.Open || st.CooldownLeft != 0 || st.Generation != 2 {
		t.Fatalf("after the cooldown: %+v, want open at generation 2 with nothing left", st)
	}
	// The restored store goes on from there: the generation rules hold.
	if _, ok, _ := fresh.Close(ctx, "web/a", 2); !ok {
		t.Fatal("close at the restored open generation refused")
	}
	if st, _ := fresh.Read(ctx, "web/a"); st.Open || st.Generation != 3 {
		t.Fatalf("after close: %+v, want closed at generation 3", st)
	}
	if _, ok, _ := fresh.Trip(ctx, "web/b", 2, time.Second, time.Second); !ok {
		t.Fatal("trip at the restored closed generation refused")
	}
	// The probe lock did not travel.
	if ok, _ := fresh.AcquireProbe(ctx, "web/a", "new-owner", time.Second); !ok {
		t.Fatal("the old process's probe lock came along")
	}
	// A snapshot of the restored store is the same document again.
	again := NewMemoryStore(newClock)
	again.Restore(snap)
	if !reflect.DeepEqual(again.Snapshot(), snap) {
		t.Fatalf("restore then snapshot:\n%+v\nwant\n%+v", again.Snapshot(), snap)
	}
}

// Restore never lowers a generation: a key the store already holds at a
// newer generation keeps its state and is named in the error, and every
// other entry is restored.
func TestMemoryStore_RestoreNeverLowersAGeneration(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(nil)
	s.Trip(ctx, "k", 0, time.Second, time.Second)
	s.Close(ctx, "k", 1)
	s.Trip(ctx, "k", 2, time.Second, time.Hour) // generation 3, open
	err := s.Restore(MemorySnapshot{Entries: []SnapshotEntry{
		{Key: "k", Generation: 1, Open: true, Cooldown: time.Second, CooldownLeft: time.Second, Disabled: true},
		{Key: "other", Generation: 4},
	}})
	if !errors.Is(err, ErrSnapshotStale) || !strings.Contains(err.Error(), "k") {
		t.Fatalf("restore over a newer generation: %v, want ErrSnapshotStale naming k", err)
	}
	if st, _ := s.Read(ctx, "k"); st.Generation != 3 || !st.Open || st.CooldownLeft <= time.Second || !st.Disabled {
		t.Fatalf("k after a stale restore: %+v, want its own generation 3 and cooldown, and the disable added", st)
	}
	if st, _ := s.Read(ctx, "other"); st.Generation != 4 {
		t.Fatalf("other: %+v, want generation 4 restored", st)
	}
}

func TestMemorySnapshot_Validate(t *testing.T) {
	tests := []struct {
		name string
		e    []SnapshotEntry
		want string
	}{
		{"empty key", []SnapshotEntry{{Generation: 1}}, "no key"},
		{"open at 0", []SnapshotEntry{{Key: "k", Open: true}}, "open at generation 0"},
		{"negative", []SnapshotEntry{{Key: "k", Generation: 1, Open: true, CooldownLeft: -time.Second}}, "negative"},
		{"closed with cooldown", []SnapshotEntry{{Key: "k", Generation: 2, CooldownLeft: time.Second}}, "closed but has a cooldown"},
		{"twice", []SnapshotEntry{{Key: "k", Generation: 2}, {Key: "k", Disabled: true}}, "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewMemoryStore(nil)
			err := s.Restore(MemorySnapshot{Entries: tc.e})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if n := len(s.Snapshot().Entries); n != 0 {
				t.Fatalf("an invalid snapshot restored %d entries", n)
			}
		})
	}
	if err := (MemorySnapshot{}).Validate(); err != nil {
		t.Fatalf("an empty snapshot: %v", err)
	}
}

// Mirror copies a shared store's report, never lowering a generation.
func TestMemoryStore_Mirror(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryStore(nil)
		if !s.Mirror("k", State{Generation: 3, Open: true, Cooldown: time.Minute, CooldownLeft: 20 * time.Second, Disabled: true}) {
			t.Fatal("first report refused")
		}
		time.Sleep(5 * time.Second)
		st, _ := s.Read(ctx, "k")
		if !st.Open || st.Generation != 3 || st.Cooldown != time.Minute || st.CooldownLeft != 15*time.Second || !st.Disabled {
			t.Fatalf("mirrored: %+v", st)
		}
		if s.Mirror("k", State{Generation: 2}) {
			t.Fatal("an older report was taken")
		}
		if _, ok, _ := s.Close(ctx, "k", 3); !ok {
			t.Fatal("the copy cannot decide on its own")
		}
		if !s.Mirror("k", State{Generation: 9}) {
			t.Fatal("newer report refused")
		}
		if st, _ := s.Read(ctx, "k"); st != (State{Generation: 9}) {
			t.Fatalf("after a closed report: %+v", st)
		}
	})
}
