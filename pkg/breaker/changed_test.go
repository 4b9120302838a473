package breaker

import (
	"context"
	"testing"
	"time"
)

// Changed reports each new generation, open state or disable the local
// snapshot takes in, whoever made it, and nothing for a refresh that
// reads what the snapshot already holds.
func TestChangedReportsWhatTheSnapshotTakesIn(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore(nil)
	var seen []State
	b, err := New(testKey, Config{}.withDefaults(), store, Options{Events: Events{Changed: func(key string, st State) {
		if key != testKey {
			t.Errorf("Changed for %q", key)
		}
		seen = append(seen, st)
	}}})
	if err != nil {
		t.Fatal(err)
	}
	seen = nil // New's first read
	other, err := New(testKey, Config{}.withDefaults(), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	other.Disable(ctx) // another instance, or an operator elsewhere
	store.Trip(ctx, testKey, 0, time.Minute, time.Minute)
	b.Refresh(ctx)
	b.Refresh(ctx) // nothing new
	store.Close(ctx, testKey, 1)
	b.Refresh(ctx)
	if len(seen) != 2 || !seen[0].Open || !seen[0].Disabled || seen[0].Generation != 1 || seen[1].Open || seen[1].Generation != 2 {
		t.Fatalf("Changed saw %+v, want the trip (disabled, open at 1), then the close (2)", seen)
	}
}
