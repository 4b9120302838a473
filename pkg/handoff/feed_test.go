package handoff

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// The feed end to end over a real pipe: the new process's store follows
// the old one's trip and close of a key it has not moved, stops following
// a key it moved itself, and ignores a line that is not a breaker state.
func TestBreakerFeedFollowsTheOldProcess(t *testing.T) {
	testnet.CheckLeaks(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	oldStore, newStore := breaker.NewMemoryStore(nil), breaker.NewMemoryStore(nil)
	r, w, err := newFeedPipe()
	if err != nil {
		t.Fatal(err)
	}
	feed := startBreakerFeed(oldStore, w, log)
	// The document: both stores at generation 2 for "p/mine", 0 else.
	for _, s := range []*breaker.MemoryStore{oldStore, newStore} {
		s.Restore(breaker.MemorySnapshot{Entries: []breaker.SnapshotEntry{{Key: "p/mine", Generation: 2}}})
	}
	doc := &State{Breaker: []BreakerEntry{{Key: "p/mine", Generation: 2}}}
	follower := followBreakerFeed(r, newStore, doc, log)
	defer follower.Stop()

	read := func(s *breaker.MemoryStore, key string) breaker.State {
		st, _ := s.Read(ctx, key)
		return st
	}
	oldStore.Trip(ctx, "p/a", 0, time.Minute, time.Minute)
	testnet.Eventually(t, "the old process's trip to be followed", func() bool { return read(newStore, "p/a").Open })
	if st := read(newStore, "p/a"); st.Generation != 1 || st.Cooldown != time.Minute || st.CooldownLeft <= 0 {
		t.Fatalf("followed trip: %+v", st)
	}
	oldStore.Close(ctx, "p/a", 1)
	testnet.Eventually(t, "the old process's close to be followed", func() bool { return read(newStore, "p/a").Generation == 2 })
	if read(newStore, "p/a").Open {
		t.Fatal("followed close left the key open")
	}

	// The new process trips p/mine itself: what the old one does with it
	// afterwards is not followed.
	newStore.Trip(ctx, "p/mine", 2, time.Minute, time.Minute)
	oldStore.Trip(ctx, "p/mine", 2, time.Hour, time.Hour)
	oldStore.Close(ctx, "p/mine", 3)
	oldStore.Trip(ctx, "p/marker", 0, time.Minute, time.Minute) // written after p/mine's changes
	testnet.Eventually(t, "the marker", func() bool { return read(newStore, "p/marker").Open })
	if st := read(newStore, "p/mine"); !st.Open || st.Generation != 3 || st.Cooldown != time.Minute {
		t.Fatalf("a key the new process moved itself followed the old one: %+v", st)
	}
	feed.stop(time.Second)
	<-follower.done // the old process's end closes the feed
	if follower.followed != 3 {
		t.Fatalf("%d changes followed, want 3 (p/a trip and close, p/marker)", follower.followed)
	}
}

// A new process that never reads the feed (a build without it) costs the
// exiting old one at most the grace: stop returns, and leaks nothing.
func TestBreakerFeedStopsWhenNobodyReads(t *testing.T) {
	testnet.CheckLeaks(t)
	ctx := context.Background()
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	store := breaker.NewMemoryStore(nil)
	r, w, err := newFeedPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(r)
	feed := startBreakerFeed(store, w, log)
	// More than a pipe holds: keys with long names, each a line.
	long := strings.Repeat("x", 1000)
	for i := range 200 {
		store.Trip(ctx, long+string(rune('A'+i%26))+strings.Repeat("y", i), 0, time.Minute, time.Minute)
	}
	feed.stop(100 * time.Millisecond)
	if !strings.Contains(logged.String(), "did not read the last breaker changes in time") {
		t.Fatalf("a feed given up is not logged:\n%s", logged.String())
	}
}

// The variable names the feed only for the child of the process that set
// it.
func TestFeedFDOnlyFromTheParent(t *testing.T) {
	for _, tc := range []struct {
		v      string
		parent int
		fd     int
		ok     bool
	}{
		{"7:100", 100, 7, true},
		{"7:100", 101, -1, false}, // left in the environment by a build without the feed
		{"7", 100, -1, false},
		{"2:100", 100, -1, false}, // stdio is never a feed
		{"x:100", 100, -1, false},
		{"", 100, -1, false},
	} {
		if fd, ok := parentFD(tc.v, tc.parent); fd != tc.fd || ok != tc.ok {
			t.Errorf("parentFD(%q, %d) = %d %v, want %d %v", tc.v, tc.parent, fd, ok, tc.fd, tc.ok)
		}
	}
}

// A feed of a format or version this build does not read is not
// followed, and the log says so.
func TestBreakerFeedOfAnotherVersionIsNotFollowed(t *testing.T) {
	testnet.CheckLeaks(t)
	ctx := context.Background()
	logged := &testnet.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logged, nil))
	r, w, err := newFeedPipe()
	if err != nil {
		t.Fatal(err)
	}
	store := breaker.NewMemoryStore(nil)
	follower := followBreakerFeed(r, store, nil, log)
	w.Write([]byte(`{"format":"l4lb-breaker-feed","version":99}` + "\n"))
	w.Write([]byte(`{"key":"p/a","generation":1,"open":true,"cooldown":"1m0s","cooldown_left":"1m0s"}` + "\n"))
	w.Close()
	<-follower.done
	follower.Stop()
	if st, _ := store.Read(ctx, "p/a"); st.Open {
		t.Fatal("a change from a feed of another version was followed")
	}
	if !strings.Contains(logged.String(), "is not one this build reads") {
		t.Fatalf("the log does not say the feed was not read:\n%s", logged.String())
	}
}
