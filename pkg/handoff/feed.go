package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// The breaker feed: the state document (state.go) is the old process's
// store as it was when the upgrade began, but the old process goes on
// dialing until the new one serves, and drains after, and a trip it makes
// then must reach the new process (a backend the old one tripped would
// otherwise start closed there, at the old generation: readmitted without
// any post-trip evidence). So from before the document is taken until it
// exits, the old process writes every change of its store to a second
// pipe, one JSON line per change (a BreakerEntry: the key's state after
// it), and the new process follows each line for every key it has not
// moved itself (breaker.MemoryStore.Follow).
//
// The pipe's fd travels in EnvBreakerFeed (env.go). A new process that
// does not read the feed (an older build) only costs the old one a
// blocked write, given up when it exits. A fleet shares its breaker state
// through Redis, and has no feed.

// The feed's first line says what follows, as the state document's header
// does: a reader follows only a format and version it knows, and says so
// otherwise (a later build may change the lines).
const (
	feedFormat  = "l4lb-breaker-feed"
	feedVersion = 1
)

type feedHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// feedFlushGrace bounds how long an exiting old process waits to write
// the changes still pending to a new process that reads slowly (or not).
const feedFlushGrace = 2 * time.Second

// breakerFeed is the old process's side.
type breakerFeed struct {
	store *breaker.MemoryStore
	w     *os.File
	log   *slog.Logger

	mu    sync.Mutex
	dirty map[string]struct{} // keys changed since the last write
	wake  chan struct{}       // a write is due; 1 slot
	quit  chan struct{}       // closed by stop: write what is due, then return
	done  chan struct{}       // closed when run returns
	unsub func()
}

// startBreakerFeed subscribes to store's changes at once (before the state
// document is taken, so no change falls between the two: one that is in
// both is taken once) and writes them to w until stop.
func startBreakerFeed(store *breaker.MemoryStore, w *os.File, log *slog.Logger) *breakerFeed {
	f := &breakerFeed{store: store, w: w, log: log, dirty: map[string]struct{}{},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	f.unsub = store.OnChange(f.changed)
	go f.run()
	return f
}

// changed notes key; the store calls it with its lock held.
func (f *breakerFeed) changed(key string) {
	f.mu.Lock()
	f.dirty[key] = struct{}{}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *breakerFeed) run() {
	defer close(f.done)
	head, _ := json.Marshal(feedHeader{Format: feedFormat, Version: feedVersion})
	if _, err := f.w.Write(append(head, '\n')); err != nil {
		f.log.Debug("upgrade: breaker feed ended", "error", err)
		f.unsub()
		return
	}
	for {
		select {
		case <-f.wake:
		case <-f.quit:
			f.flush()
			return
		}
		if err := f.flush(); err != nil {
			// The new process is gone, or closed its end: nothing will
			// read what comes next.
			f.log.Debug("upgrade: breaker feed ended", "error", err)
			f.unsub()
			return
		}
	}
}

// flush writes the current state of every key changed since the last
// flush, in key order.
func (f *breakerFeed) flush() error {
	f.mu.Lock()
	keys := make([]string, 0, len(f.dirty))
	for k := range f.dirty {
		keys = append(keys, k)
	}
	clear(f.dirty)
	f.mu.Unlock()
	slices.Sort(keys)
	var buf []byte
	for _, k := range keys {
		st, err := f.store.Read(context.Background(), k)
		if err != nil {
			return err
		}
		line, err := json.Marshal(breakerEntryOf(k, st))
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	if len(buf) == 0 {
		return nil
	}
	_, err := f.w.Write(buf)
	return err
}

// stop writes what is still due (for at most grace: the reader may never
// read) and closes the pipe.
func (f *breakerFeed) stop(grace time.Duration) {
	if f == nil {
		return
	}
	f.unsub()
	close(f.quit)
	if grace > 0 {
		select {
		case <-f.done:
		case <-time.After(grace):
			f.log.Warn("upgrade: the new process did not read the last breaker changes in time", "grace", grace.String())
		}
	}
	f.w.Close() // unblocks a write still under way
	<-f.done
}

// newFeedPipe is the feed's pipe: the read end for the new process (not
// close-on-exec is set by ForkExec's Files), the write end pollable, so
// closing it ends a write the reader never takes.
func newFeedPipe() (r int, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, fmt.Errorf("breaker feed pipe: %w", err)
	}
	if err := unix.SetNonblock(p[1], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return -1, nil, fmt.Errorf("breaker feed pipe: %w", err)
	}
	return p[0], os.NewFile(uintptr(p[1]), "upgrade-breaker-feed"), nil
}

// Follower is the new process's side: it applies the old process's breaker
// changes to this one's store until the feed ends.
type Follower struct {
	store *breaker.MemoryStore
	r     *os.File
	log   *slog.Logger
	// taken is each key's generation as last taken from the old
	// process: the state document's, then each change followed.
	taken    map[string]uint64
	followed int
	done     chan struct{}
}

// followBreakerFeed reads the feed on fd into store until the old process
// closes it (it exited) or stop. doc is the state document the feed
// continues.
func followBreakerFeed(fd int, store *breaker.MemoryStore, doc *State, log *slog.Logger) *Follower {
	unix.SetNonblock(fd, true) // pollable: stop's Close ends a read under way
	f := &Follower{store: store, r: os.NewFile(uintptr(fd), "upgrade-breaker-feed"), log: log,
		taken: map[string]uint64{}, done: make(chan struct{})}
	if doc != nil {
		for _, b := range doc.Breaker {
			f.taken[b.Key] = b.Generation
		}
	}
	go f.run()
	return f
}

func (f *Follower) run() {
	defer close(f.done)
	sc := bufio.NewScanner(f.r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	if sc.Scan() {
		var h feedHeader
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Format != feedFormat || h.Version != feedVersion {
			f.log.Warn("upgrade: the old process's breaker feed is not one this build reads; its breaker changes from now on are not followed",
				"header", string(sc.Bytes()), "want_format", feedFormat, "want_version", feedVersion)
			return
		}
	}
	for sc.Scan() {
		if err := f.apply(sc.Bytes()); err != nil {
			f.log.Warn("upgrade: breaker feed: a change from the old process ignored", "error", err)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		f.log.Warn("upgrade: breaker feed: read failed", "error", err)
	}
	f.log.Info("upgrade: breaker feed from the old process ended", "changes_followed", f.followed)
}

// apply follows one line of the feed.
func (f *Follower) apply(line []byte) error {
	var b BreakerEntry
	if err := json.Unmarshal(line, &b); err != nil {
		return fmt.Errorf("not a breaker state: %w", err)
	}
	snap, err := (&State{Breaker: []BreakerEntry{b}}).breakerSnapshot()
	if err != nil {
		return err
	}
	e := snap.Entries[0]
	st := breaker.State{Generation: e.Generation, Open: e.Open, Cooldown: e.Cooldown, CooldownLeft: e.CooldownLeft}
	if !f.store.Follow(e.Key, f.taken[e.Key], st) {
		return nil // not news, or this process decides the key now
	}
	f.taken[e.Key] = e.Generation
	f.followed++
	f.log.Info("upgrade: breaker change followed from the old process", "backend", e.Key,
		"generation", e.Generation, "open", e.Open)
	return nil
}

// Stop ends the reading (a shutdown before the old process exited).
func (f *Follower) Stop() {
	if f == nil {
		return
	}
	f.r.Close()
	<-f.done
}
