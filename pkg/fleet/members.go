package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// memberState is what a Store knows of the backends operators added
// through the admin API, as the fleet shares them: per pool, an opaque
// document the caller encodes (cmd/l4lb stores
// json.Marshal([]membership.Added)), one Redis key per pool, with a
// version that grows with every write (membersredis.go). The rules:
//
//   - Writes need Redis. PutMembers while the Store is apart fails with
//     ErrStoreDown and writes nothing anywhere: an operator's change must
//     reach the whole fleet or be refused (the admin API answers 503),
//     and a change kept on one instance to be written back later could
//     undo, by its version, a change another operator made meanwhile.
//     (A write whose answer timed out may have reached Redis all the
//     same: the caller reads the document again before it retries, and
//     finds its change there, or not.)
//   - Writes are conditional: a change is made on a version (its base),
//     and a newer one in Redis, or known to this Store, refuses it with
//     ErrMembersChanged, so that no change made on an older list undoes
//     one acknowledged since. Still possible: Redis loses a change, and
//     an instance that never heard of it writes one of its own before
//     the instances that did write theirs back; its version is the newer.
//   - Reads answer the newest document known: Redis's, or this
//     instance's last-known copy (every answer and every own write) when
//     that is newer (Redis lost it) or when the Store is apart. Apart, a
//     pool (or the index) this Store never had an answer about is
//     ErrStoreDown rather than a guess of "none".
//   - No instance deletes a document, so Redis holding an older version
//     than a copy, or none, means Redis lost it (a restart without
//     persistence, a FLUSHALL, a failover to a lagging replica): the
//     instance writes its copy back, at its version, where Redis is
//     behind. Versions order the write-backs, so of two copies the newer
//     wins whoever writes first, and a write made after the loss (whose
//     version is at least the server's clock in milliseconds) is never
//     undone by a copy from before it.
//   - Changes travel by RESP3 invalidation: each instance reads the
//     index and the documents through the client-side cache, the server
//     tells it when another instance writes one, and only then does it
//     re-read that one (a new pool's first document changes the index).
//     Nothing is polled per sync_interval: with no change, the fleet's
//     load does not grow with instances × pools.
//   - A record this build cannot read (ErrMembersUnreadable: not
//     "VERSION DOCUMENT", or a document Options.CheckMembers refuses) is
//     never taken: every instance keeps the document it last read, and
//     serves it. It is logged once per value Redis holds, not at every
//     read. No write goes over it (PutMembers and the write-back refuse
//     it) but ReplaceUnreadableMembers, an operator's explicit word: the
//     value may be another build's record, which this one cannot merge.
//     A document at a version below this instance's copy is not judged:
//     that is Redis behind, written back as after a loss.
type memberState struct {
	mu sync.Mutex
	// docs is the newest document known per pool; a pool is present once
	// Redis has answered about it (version 0: it had none).
	docs map[string]memberDoc
	// listed are the pools the index named; indexRead, whether it has
	// been read at all.
	listed    map[string]struct{}
	indexRead bool
	// announced is the version last told to the watchers, per pool.
	announced map[string]uint64
	// dirty are the pools to re-read (invalidated, or written here), all
	// that the index and every pool are (a reconnect, a flush, a rejoin,
	// a new watcher, a change of the index).
	dirty    map[string]struct{}
	all      bool
	watchers map[*memberWatch]struct{}
	// unreadable is, per pool, the hash (xxhash) of the unreadable value
	// last logged: a value may be large, and only its sameness counts.
	unreadable map[string]uint64
	// kick wakes Run to sync (syncMembers).
	kick chan struct{}
}

type memberWatch struct {
	changed func(pool string)
	stopped atomic.Bool
}

func newMemberState() memberState {
	return memberState{
		docs:       map[string]memberDoc{},
		listed:     map[string]struct{}{},
		announced:  map[string]uint64{},
		dirty:      map[string]struct{}{},
		watchers:   map[*memberWatch]struct{}{},
		unreadable: map[string]uint64{},
		kick:       make(chan struct{}, 1),
	}
}

// learn keeps d, an answer from Redis or an own write, if it is newer than
// the copy; it answers the newest document known and whether Redis is
// behind it (d is older than the copy).
func (m *memberState) learn(pool string, d memberDoc) (newest memberDoc, behind bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.docs[pool]
	if !ok || d.version > cur.version {
		m.docs[pool] = d
		return d, false
	}
	return cur, d.version < cur.version
}

// known is the copy of a pool's document, and whether there is one.
func (m *memberState) known(pool string) (memberDoc, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.docs[pool]
	return d, ok
}

// list records what the index named.
func (m *memberState) list(pools []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.indexRead = true
	for _, p := range pools {
		m.listed[p] = struct{}{}
	}
}

// pools is every pool known to have a document (named by the index or
// with a copy), sorted; ok is false before the index was ever read.
func (m *memberState) pools() (pools []string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.listed {
		pools = append(pools, p)
	}
	for p, d := range m.docs {
		if _, dup := m.listed[p]; !dup && d.version > 0 {
			pools = append(pools, p)
		}
	}
	slices.Sort(pools)
	return pools, m.indexRead
}

// markDirty has the next sync re-read pool; markAll, everything.
func (m *memberState) markDirty(pool string) {
	m.mu.Lock()
	m.dirty[pool] = struct{}{}
	m.mu.Unlock()
}

func (m *memberState) markAll() {
	m.mu.Lock()
	m.all = true
	m.mu.Unlock()
}

// firstUnreadable records e's value as pool's unreadable record, and
// reports whether it is another than the one recorded before (to log).
func (m *memberState) firstUnreadable(e *unreadableMembers) bool {
	h := xxhash.Sum64String(e.raw)
	m.mu.Lock()
	defer m.mu.Unlock()
	if was, ok := m.unreadable[e.pool]; ok && was == h {
		return false
	}
	m.unreadable[e.pool] = h
	return true
}

// isUnreadable reports whether pool's record was unreadable when last
// read.
func (m *memberState) isUnreadable(pool string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.unreadable[pool]
	return ok
}

// readable records that pool's record was read: the next unreadable one
// is logged again, whatever it holds.
func (m *memberState) readable(pool string) {
	m.mu.Lock()
	delete(m.unreadable, pool)
	m.mu.Unlock()
}

// poke wakes Run to sync; it never blocks (rueidis' reading goroutine
// calls it).
func (m *memberState) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// take empties the dirty marks. Nothing is to be done for a Store that
// never used the members: it has no copy, no watcher and no index read.
func (m *memberState) take() (all bool, pools []string, engaged bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all, m.all = m.all, false
	for p := range m.dirty {
		pools = append(pools, p)
	}
	clear(m.dirty)
	return all, pools, len(m.docs) > 0 || len(m.watchers) > 0 || m.indexRead
}

// due are the pools whose copy is newer than what the watchers were told,
// marked told, and the watchers to tell. With no watcher nothing is due,
// so that the first watcher is told of every document there is.
func (m *memberState) due() (pools []string, ws []*memberWatch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.watchers) == 0 {
		return nil, nil
	}
	for p, d := range m.docs {
		if d.version > m.announced[p] {
			m.announced[p] = d.version
			pools = append(pools, p)
		}
	}
	slices.Sort(pools)
	for w := range m.watchers {
		ws = append(ws, w)
	}
	return pools, ws
}

// ErrMembersChanged: PutMembers was refused because another instance
// wrote the pool's document after the version the change was made on.
// Read it again (MembersAt), make the change on it, and put that.
var ErrMembersChanged = errors.New("the pool's backends were changed meanwhile by another instance")

// ErrMembersReadable: ReplaceUnreadableMembers found the pool's record
// readable, and left it: change it as usual (PutMembers).
var ErrMembersReadable = errors.New("the fleet's record of the pool's backends is readable: nothing to replace")

// PutMembers replaces pool's document for the whole fleet, if no other
// instance wrote it after base, the version doc was made from (0: no
// document): otherwise it fails with ErrMembersChanged and writes
// nothing, so that two operators adding backends at once through two
// instances do not lose one add. A record this build cannot read refuses
// it too, with an error wrapping ErrMembersUnreadable (made again, the
// change would be refused again: ReplaceUnreadableMembers is the way
// out). It answers the version written. It needs Redis: apart it fails
// with an error wrapping ErrStoreDown and writes nothing (memberState
// explains why).
func (s *Store) PutMembers(ctx context.Context, pool string, doc []byte, base uint64) (uint64, error) {
	floor, _ := s.members.known(pool)
	if floor.version > base {
		// This Store knows a newer document than the change was made on:
		// Redis may have lost it (and be behind, so the script would take
		// the change), but it was acknowledged to someone. Unless the
		// record is unreadable: no try would be made on it, and the
		// caller's base may be behind only because its read of the record
		// failed. The server says whether it still is.
		if s.members.isUnreadable(pool) {
			if _, ok, err := s.fetchDoc(ctx, pool, true); ok && errors.Is(err, ErrMembersUnreadable) {
				return 0, err
			}
		}
		return 0, fmt.Errorf("members of pool %s: %w (this instance knows version %d, the change was made on %d)", pool, ErrMembersChanged, floor.version, base)
	}
	var v uint64
	ok, err := s.call(ctx, "members_write", func(ctx context.Context, r *redisStore) (err error) {
		v, err = r.putMembers(ctx, pool, doc, max(floor.version, base), base)
		return err
	})
	if !ok {
		return 0, fmt.Errorf("members of pool %s: %w: the change may not have reached the fleet; retry when it is back (l4lb_cluster_store_up 1)", pool, ErrStoreDown)
	}
	_, unreadable := scriptRefusal(err, "UNREADABLE")
	if err = changedMembers(err, base); unreadable || errors.Is(err, ErrMembersChanged) {
		// The next MembersAt answers the newest document known: have it
		// be the server's, not the cache's copy that awaits its
		// invalidation, or the change made again would be refused again.
		// That read also tells a record this build cannot read, which no
		// try would ever be made on.
		d, ok, ferr := s.fetchDoc(ctx, pool, true)
		switch {
		case ok && errors.Is(ferr, ErrMembersUnreadable):
			return 0, ferr
		case ok && ferr == nil:
			s.members.learn(pool, d)
			if unreadable {
				err = fmt.Errorf("%w (its unreadable record was replaced)", ErrMembersChanged)
			}
		case unreadable:
			err = fmt.Errorf("%w (Redis refused the write over it; reading it again: %v)", ErrMembersUnreadable, ferr)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("members of pool %s: %w", pool, err)
	}
	s.members.learn(pool, memberDoc{version: v, doc: append([]byte{}, doc...)})
	s.members.markDirty(pool) // have the watchers told, and the key tracked again
	s.members.poke()
	return v, nil
}

// Members is pool's document, nil when none is recorded: Redis's, or the
// copy when it is newer (Redis lost it, and the copy is written back) or
// when the Store is apart. When Redis's record is unreadable the error
// wraps ErrMembersUnreadable and the document is the last good copy (nil
// when this Store never read one). Apart, a pool this Store never had an answer
// about is an error wrapping ErrStoreDown. The caller may keep the slice.
func (s *Store) Members(ctx context.Context, pool string) ([]byte, error) {
	doc, _, err := s.MembersAt(ctx, pool)
	return doc, err
}

// MembersAt is Members with the document's version (0: none recorded),
// the base of a change made on it (PutMembers).
//
// A record this build cannot read is an error wrapping
// ErrMembersUnreadable, which names the pool, the key and why, with the
// copy this Store keeps serving (the last good document read or written
// here; nil and 0 if none): a caller that takes it holds the base every
// change is made on, which then fails as unreadable rather than as made
// on an older document.
func (s *Store) MembersAt(ctx context.Context, pool string) ([]byte, uint64, error) {
	d, ok, err := s.fetchDoc(ctx, pool, false)
	if ok {
		if errors.Is(err, ErrMembersUnreadable) {
			last, _ := s.members.known(pool)
			return bytes.Clone(last.doc), last.version, err
		}
		if err != nil {
			return nil, 0, fmt.Errorf("members of pool %s: %w", pool, err)
		}
		newest, behind := s.members.learn(pool, d)
		if behind {
			s.members.markDirty(pool)
			s.members.poke()
		}
		return bytes.Clone(newest.doc), newest.version, nil
	}
	if d, known := s.members.known(pool); known {
		return bytes.Clone(d.doc), d.version, nil
	}
	return nil, 0, fmt.Errorf("members of pool %s: %w, and this instance has no copy", pool, ErrStoreDown)
}

// MemberPools is every pool with a document, sorted: the index in Redis
// with the pools this Store has a copy of (Redis may have lost some).
// Apart it answers from what it knows, or an error wrapping ErrStoreDown
// if it never read the index.
func (s *Store) MemberPools(ctx context.Context) ([]string, error) {
	if ok, err := s.fetchIndex(ctx); ok && err != nil {
		return nil, fmt.Errorf("members index: %w", err)
	}
	pools, read := s.members.pools()
	if !read {
		return nil, fmt.Errorf("members index: %w, and this instance never read it", ErrStoreDown)
	}
	return pools, nil
}

// WatchMembers calls changed(pool) when pool's document has a version
// newer than the last one told: another instance's write (told by the
// server's invalidation), this one's, or one found at a rejoin. It is
// called from Run's goroutine (never an event loop, never rueidis'),
// one call at a time, at most once per version, and only after Members
// answers that version or a newer one. Right after WatchMembers it is
// called once for every pool that has a document, so a caller that
// watches first and reads after misses nothing. Once stop returns,
// changed is not called again (but for a call already under way); stop
// may be called from changed. Calls need Run to be running, and wait for
// changed to return (as do Run's checks of Redis): changed may call
// Members, but should not wait for anything Run does.
func (s *Store) WatchMembers(changed func(pool string)) (stop func()) {
	w := &memberWatch{changed: changed}
	s.members.mu.Lock()
	s.members.watchers[w] = struct{}{}
	s.members.all = true
	s.members.mu.Unlock()
	s.members.poke()
	return func() {
		w.stopped.Store(true)
		s.members.mu.Lock()
		delete(s.members.watchers, w)
		s.members.mu.Unlock()
	}
}

// syncMembers re-reads what was invalidated (through the cache, which has
// the server track the keys again), writes back every copy Redis is
// behind, and tells the watchers what changed. Run calls it when poked.
// Apart it leaves everything for the rejoin, which marks it all again.
func (s *Store) syncMembers(ctx context.Context) {
	all, pools, engaged := s.members.take()
	if !engaged || (!all && len(pools) == 0) {
		return
	}
	if all {
		ok, err := s.fetchIndex(ctx)
		if !ok {
			s.members.markAll()
			return
		}
		if err != nil {
			s.log.Error("cluster store: the members index is unusable", "key", s.ks.membersIndex(), "error", err)
		}
		pools, _ = s.members.pools()
	}
	for _, pool := range pools {
		if !s.syncPool(ctx, pool) {
			s.members.markAll()
			return
		}
	}
	due, ws := s.members.due()
	for _, pool := range due {
		for _, w := range ws {
			if !w.stopped.Load() {
				w.changed(pool)
			}
		}
	}
}

// syncPool re-reads one pool's document and writes the copy back if Redis
// is behind it; false when Redis is out of reach.
func (s *Store) syncPool(ctx context.Context, pool string) bool {
	d, ok, err := s.fetchDoc(ctx, pool, false)
	if !ok {
		return false
	}
	if errors.Is(err, ErrMembersUnreadable) {
		return true // logged once, by judge; the copy stays as it is
	}
	if err != nil {
		s.log.Error("cluster store: a pool's members document is unusable", "pool", pool, "key", s.ks.members(pool), "error", err)
		return true
	}
	newest, behind := s.members.learn(pool, d)
	if !behind {
		return true
	}
	var now memberDoc
	var wrote bool
	ok, err = s.call(ctx, "members_write", func(ctx context.Context, r *redisStore) (err error) {
		now, wrote, err = r.restoreMembers(ctx, pool, newest)
		return err
	})
	if !ok {
		return false
	}
	if now, err = s.judge(pool, now, err); errors.Is(err, ErrMembersUnreadable) {
		return true // written over it meanwhile, by hand or by another build
	}
	if err != nil {
		s.log.Error("cluster store: a pool's members document cannot be written back", "pool", pool, "key", s.ks.members(pool), "error", err)
		return true
	}
	if wrote {
		s.log.Info("cluster store: wrote back a pool's members document Redis had lost", "pool", pool, "version", newest.version, "redis_version", d.version)
	}
	s.members.learn(pool, now)
	return true
}

// fetchDoc reads pool's document from Redis, through the client-side
// cache or, fresh, from the server; ok false: the Store is apart (or just
// went). The answer is judged (judge).
func (s *Store) fetchDoc(ctx context.Context, pool string, fresh bool) (d memberDoc, ok bool, err error) {
	ok, err = s.call(ctx, "members_read", func(ctx context.Context, r *redisStore) (err error) {
		if fresh {
			d, err = r.readMembersFresh(ctx, pool)
		} else {
			d, err = r.readMembers(ctx, pool)
		}
		return err
	})
	if ok {
		d, err = s.judge(pool, d, err)
	}
	return d, ok, err
}

// judge is d or err, what was read of pool's document, with a document
// Options.CheckMembers refuses made unreadable when it would be taken
// (newer than the copy; below it, Redis is behind and the copy is
// written back). An unreadable record is logged the first time its value
// is read; a readable one ends that.
func (s *Store) judge(pool string, d memberDoc, err error) (memberDoc, error) {
	if err == nil && d.version > 0 && s.checkMembers != nil {
		if cur, _ := s.members.known(pool); d.version > cur.version {
			if cerr := s.checkMembers(d.doc); cerr != nil {
				err = &unreadableMembers{pool: pool, key: s.ks.members(pool),
					raw: strconv.FormatUint(d.version, 10) + " " + string(d.doc), err: fmt.Errorf("its document: %w", cerr)}
			}
		}
	}
	var bad *unreadableMembers
	switch {
	case errors.As(err, &bad):
		if s.members.firstUnreadable(bad) {
			s.log.Error("cluster store: the fleet's record of a pool's API-added backends is unreadable: every instance keeps the backends it last read, "+
				"and adding or removing one fails until the record is replaced (docs/fleet.md, An unreadable record)",
				"pool", pool, "key", bad.key, "error", bad.err, "value", fmt.Sprintf("%.200q", bad.raw))
		}
		return memberDoc{}, err
	case err == nil:
		s.members.readable(pool)
	}
	return d, err
}

// ReplaceUnreadableMembers writes doc, this instance's list, over pool's
// record when Redis holds one this build cannot read
// (ErrMembersUnreadable), and only then: the write is conditional on the
// very value found unreadable, so a record another instance wrote
// meanwhile stays (ErrMembersChanged). Every instance then takes doc, as
// any write. A readable record is left as it is (ErrMembersReadable). It
// needs Redis (ErrStoreDown apart). It answers the version written.
func (s *Store) ReplaceUnreadableMembers(ctx context.Context, pool string, doc []byte) (uint64, error) {
	d, ok, err := s.fetchDoc(ctx, pool, true)
	var bad *unreadableMembers
	switch {
	case !ok:
		return 0, fmt.Errorf("members of pool %s: %w: nothing was replaced; retry when it is back (l4lb_cluster_store_up 1)", pool, ErrStoreDown)
	case err == nil:
		return 0, fmt.Errorf("members of pool %s: %w (version %d)", pool, ErrMembersReadable, d.version)
	case !errors.As(err, &bad):
		return 0, fmt.Errorf("members of pool %s: %w", pool, err)
	}
	floor, _ := s.members.known(pool)
	var v uint64
	ok, err = s.call(ctx, "members_write", func(ctx context.Context, r *redisStore) (err error) {
		v, err = r.replaceMembers(ctx, pool, bad.raw, doc, floor.version)
		return err
	})
	if !ok {
		return 0, fmt.Errorf("members of pool %s: %w: the replacement may not have reached the fleet; look again when it is back (l4lb_cluster_store_up 1)", pool, ErrStoreDown)
	}
	if _, changed := scriptRefusal(err, "CHANGED "); changed {
		return 0, fmt.Errorf("members of pool %s: %w: its record is no longer the unreadable one; look again", pool, ErrMembersChanged)
	}
	if err != nil {
		return 0, fmt.Errorf("members of pool %s: %w", pool, err)
	}
	s.log.Warn("cluster store: replaced the unreadable record of a pool's API-added backends with this instance's", "pool", pool, "key", bad.key,
		"version", v, "replaced", fmt.Sprintf("%.200q", bad.raw))
	s.members.readable(pool)
	s.members.learn(pool, memberDoc{version: v, doc: bytes.Clone(doc)})
	s.members.markDirty(pool)
	s.members.poke()
	return v, nil
}

// fetchIndex reads the index from Redis into what the Store knows; ok
// false: the Store is apart (or just went).
func (s *Store) fetchIndex(ctx context.Context) (ok bool, err error) {
	var listed []string
	ok, err = s.call(ctx, "members_read", func(ctx context.Context, r *redisStore) (err error) {
		listed, err = r.readMemberPools(ctx)
		return err
	})
	if ok && err == nil {
		s.members.list(listed)
	}
	return ok, err
}
