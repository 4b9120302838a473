package fleet

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The membership documents: what one instance writes through PutMembers
// reaches the others by invalidation, Redis down refuses writes and
// answers reads from the last-known copy, and an emptied Redis gets the
// newest copy back.

const (
	docOne = `[{"addr":"10.0.0.1:80","weight":1}]`
	docTwo = `[{"addr":"10.0.0.1:80","weight":1},{"addr":"10.0.0.2:80","weight":3,"id":"b2"}]`
)

// memberCalls records a Store's WatchMembers calls, and what Members
// answered inside each (a call must come after its change is readable).
type memberCalls struct {
	mu   sync.Mutex
	n    map[string]int
	seen map[string]string
}

func watchMembers(t *testing.T, s *Store) (*memberCalls, func()) {
	t.Helper()
	c := &memberCalls{n: map[string]int{}, seen: map[string]string{}}
	stop := s.WatchMembers(func(pool string) {
		doc, err := s.Members(context.Background(), pool)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n[pool]++
		if err != nil {
			c.seen[pool] = "error: " + err.Error()
		} else {
			c.seen[pool] = string(doc)
		}
	})
	t.Cleanup(stop)
	return c, stop
}

func (c *memberCalls) count(pool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[pool]
}

func (c *memberCalls) last(pool string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[pool]
}

// told waits until c has been called for pool n times in all, the last
// one reading want.
func (c *memberCalls) told(t *testing.T, who, pool string, n int, want string) {
	t.Helper()
	testnet.Eventually(t, who+" is told of "+pool+" #"+strconv.Itoa(n), func() bool {
		return c.count(pool) >= n
	})
	if got := c.count(pool); got != n {
		t.Fatalf("%s was told of %s %d times, want %d", who, pool, got, n)
	}
	if got := c.last(pool); got != want {
		t.Fatalf("%s, told of %s, read %q, want %q", who, pool, got, want)
	}
}

func members(t *testing.T, s *Store, pool string) string {
	t.Helper()
	doc, err := s.Members(context.Background(), pool)
	if err != nil {
		t.Fatalf("Members(%s): %v", pool, err)
	}
	return string(doc)
}

// put writes doc as a change made on the document s knows now.
func put(t *testing.T, s *Store, pool, doc string) {
	t.Helper()
	_, base, err := s.MembersAt(context.Background(), pool)
	if err != nil {
		t.Fatalf("MembersAt(%s): %v", pool, err)
	}
	if _, err := s.PutMembers(context.Background(), pool, []byte(doc), base); err != nil {
		t.Fatalf("PutMembers(%s): %v", pool, err)
	}
}

// rawMembers is what the server holds for pool's document: its version
// (0: none) and the document.
func (h *fleetHarness) rawMembers(pool string) (uint64, string) {
	h.t.Helper()
	v, err := h.srv.Do("GET", keyspace{prefix: testPrefix}.members(pool))
	if err != nil {
		h.t.Fatalf("GET members of %s: %v", pool, err)
	}
	if v == "(nil)" {
		return 0, ""
	}
	ver, doc, _ := strings.Cut(v, " ")
	n, err := strconv.ParseUint(ver, 10, 64)
	if err != nil {
		h.t.Fatalf("members of %s hold %q", pool, v)
	}
	return n, doc
}

func TestMembersKeys(t *testing.T) {
	ks := keyspace{prefix: "l4lb:"}
	if got := ks.members("web"); got != "l4lb:{members}:web" {
		t.Fatalf("members key %q", got)
	}
	for _, tc := range []struct {
		key          string
		pool         string
		index, found bool
	}{
		{"l4lb:{members}", "", true, true},
		{"l4lb:{members}:web", "web", false, true},
		{"l4lb:{members}:a:b}", "a:b}", false, true},
		{"l4lb:{members}x", "", false, false},
		{"l4lb:{web/10.0.0.1:80}:gen", "", false, false},
		{"other:{members}:web", "", false, false},
	} {
		pool, index, ok := ks.membersKey(tc.key)
		if pool != tc.pool || index != tc.index || ok != tc.found {
			t.Errorf("membersKey(%q) = %q, %v, %v; want %q, %v, %v", tc.key, pool, index, ok, tc.pool, tc.index, tc.found)
		}
	}
}

// A's writes reach B by invalidation alone: B's cache lives for an hour
// and B checks Redis hourly. Each change is told once to each instance
// (the writer too), after Members answers it; a pool's first document
// reaches B through the index.
func TestMembers_PutOnOneReachesAnotherByInvalidation(t *testing.T) {
	h := newFleet(t)
	a, b := h.store(nil, Options{}), h.store(nil, Options{})
	wa, _ := watchMembers(t, a)
	wb, _ := watchMembers(t, b)
	if got := members(t, b, "web"); got != "" {
		t.Fatalf("B reads %q before any write", got)
	}
	if pools, err := b.MemberPools(h.ctx); err != nil || len(pools) != 0 {
		t.Fatalf("B's pools before any write: %v %v", pools, err)
	}
	before := b.Invalidations()

	put(t, a, "web", docOne)
	wb.told(t, "B", "web", 1, docOne)
	wa.told(t, "A", "web", 1, docOne)
	if n := b.Invalidations(); n <= before {
		t.Fatalf("B counted %d invalidations (%d before A's write): it learnt it some other way", n, before)
	}
	v1, _ := h.rawMembers("web")

	put(t, a, "web", docTwo)
	wb.told(t, "B", "web", 2, docTwo)
	if got := members(t, b, "web"); got != docTwo {
		t.Fatalf("B reads %q after being told, want %q", got, docTwo)
	}
	if v2, doc := h.rawMembers("web"); v2 <= v1 || doc != docTwo {
		t.Fatalf("redis holds version %d %q after the second write (first: %d)", v2, doc, v1)
	}

	// A pool B never read: only the index tells B of it.
	put(t, a, "api", docOne)
	wb.told(t, "B", "api", 1, docOne)
	if pools, err := b.MemberPools(h.ctx); err != nil || !slices.Equal(pools, []string{"api", "web"}) {
		t.Fatalf("B's pools: %v %v", pools, err)
	}
	// B was told of api after everything about web: no second call since.
	if n := wb.count("web"); n != 2 {
		t.Fatalf("B was told of web %d times for 2 writes", n)
	}
	wa.told(t, "A", "api", 1, docOne)
	if n := wa.count("web"); n != 2 {
		t.Fatalf("A was told of web %d times for its 2 writes", n)
	}
}

// A cut off from Redis refuses writes (ErrStoreDown: the admin API's 503)
// and writes nothing; it reads its last-known copy, and says it does not
// know a pool it never had an answer about. Back, it writes again.
func TestMembers_PutWhileApartIsRefused(t *testing.T) {
	h := newFleet(t)
	p := startProxy(t, h.srv.Addr)
	a := h.store(func(c *Config) { c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, 200*time.Millisecond }, Options{})
	b := h.store(nil, Options{})
	wa, _ := watchMembers(t, a) // as cmd/l4lb does: it reads the index
	wb, _ := watchMembers(t, b)
	put(t, a, "web", docOne)
	wa.told(t, "A", "web", 1, docOne)
	wb.told(t, "B", "web", 1, docOne)

	p.Cut()
	testnet.Eventually(t, "A notices the cut", func() bool { return !a.Up() })
	v, _ := h.rawMembers("web")
	_, err := a.PutMembers(h.ctx, "web", []byte(docTwo), v)
	if !errors.Is(err, ErrStoreDown) {
		t.Fatalf("PutMembers while apart: %v, want ErrStoreDown", err)
	}
	if got := members(t, a, "web"); got != docOne {
		t.Fatalf("A reads %q while apart, want its copy %q", got, docOne)
	}
	if pools, err := a.MemberPools(h.ctx); err != nil || !slices.Equal(pools, []string{"web"}) {
		t.Fatalf("A's pools while apart: %v %v", pools, err)
	}
	if _, err := a.Members(h.ctx, "api"); !errors.Is(err, ErrStoreDown) {
		t.Fatalf("Members of a pool A never read, while apart: %v, want ErrStoreDown", err)
	}
	if _, doc := h.rawMembers("web"); doc != docOne {
		t.Fatalf("redis holds %q after A's refused write", doc)
	}

	p.Heal()
	testnet.Eventually(t, "A rejoins", a.Up)
	put(t, a, "web", docTwo)
	wb.told(t, "B", "web", 2, docTwo)
}

// A Store that never reached Redis knows nothing: every call says so.
func TestMembers_NeverJoinedKnowsNothing(t *testing.T) {
	s := neverJoined(t)
	ctx := context.Background()
	if _, err := s.PutMembers(ctx, "web", []byte(docOne), 0); !errors.Is(err, ErrStoreDown) {
		t.Fatalf("PutMembers: %v", err)
	}
	if doc, err := s.Members(ctx, "web"); !errors.Is(err, ErrStoreDown) || doc != nil {
		t.Fatalf("Members: %q %v", doc, err)
	}
	if pools, err := s.MemberPools(ctx); !errors.Is(err, ErrStoreDown) || pools != nil {
		t.Fatalf("MemberPools: %v %v", pools, err)
	}
}

// Redis emptied (FLUSHALL) under two instances that know a document: it
// is written back at its version, reads never answer "none" meanwhile,
// no watcher is told of a change (there was none), and the next write
// orders after the restored one.
func TestMembers_RedisEmptiedGetsDocumentsBack(t *testing.T) {
	h := newFleet(t)
	fast := func(c *Config) { c.SyncInterval = 200 * time.Millisecond }
	a, b := h.store(fast, Options{}), h.store(fast, Options{})
	wa, _ := watchMembers(t, a)
	wb, _ := watchMembers(t, b)
	put(t, a, "web", docOne)
	wb.told(t, "B", "web", 1, docOne)
	v1, _ := h.rawMembers("web")

	if _, err := h.srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		if got := members(t, s, "web"); got != docOne {
			t.Fatalf("read %q right after the flush, want the copy %q", got, docOne)
		}
	}
	testnet.Eventually(t, "redis holds the document again", func() bool {
		v, doc := h.rawMembers("web")
		return v == v1 && doc == docOne
	})
	if v, err := h.srv.Do("SISMEMBER", keyspace{prefix: testPrefix}.membersIndex(), "web"); err != nil || v != "1" {
		t.Fatalf("index after the write-back: %q %v", v, err)
	}
	pastTheLoss(t, h, a, b)

	put(t, b, "web", docTwo)
	wa.told(t, "A", "web", 2, docTwo)
	wb.told(t, "B", "web", 2, docTwo)
	if v2, _ := h.rawMembers("web"); v2 <= v1 {
		t.Fatalf("the write after the loss has version %d, not above the restored %d", v2, v1)
	}
}

// Redis emptied while both instances are cut off, A with an older copy
// than B's. A rejoins first and writes its copy back; B, rejoining, finds
// Redis behind its own and writes that back; A is told of it. The newer
// copy wins though it came back last.
func TestMembers_NewestCopyWinsAfterTheLoss(t *testing.T) {
	h := newFleet(t)
	pa, pb := startProxy(t, h.srv.Addr), startProxy(t, h.srv.Addr)
	via := func(p *cutProxy) func(*Config) {
		return func(c *Config) { c.RedisURL, c.Timeout, c.SyncInterval = p.URL(), outageTimeout, 200*time.Millisecond }
	}
	a, b := h.store(via(pa), Options{}), h.store(via(pb), Options{})
	wa, _ := watchMembers(t, a)
	wb, _ := watchMembers(t, b)
	put(t, a, "web", docOne)
	wb.told(t, "B", "web", 1, docOne)
	pa.Cut()
	testnet.Eventually(t, "A notices the cut", func() bool { return !a.Up() })
	put(t, b, "web", docTwo)
	v2, _ := h.rawMembers("web")
	pb.Cut()
	testnet.Eventually(t, "B notices the cut", func() bool { return !b.Up() })

	if _, err := h.srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	pa.Heal()
	testnet.Eventually(t, "A writes its older copy back", func() bool {
		_, doc := h.rawMembers("web")
		return doc == docOne
	})
	pb.Heal()
	testnet.Eventually(t, "B writes its newer copy back", func() bool {
		v, doc := h.rawMembers("web")
		return v == v2 && doc == docTwo
	})
	wa.told(t, "A", "web", 2, docTwo)
	if n := wb.count("web"); n != 2 {
		t.Fatalf("B was told of web %d times (its own two writes)", n)
	}
}

// A stopped watcher is not called again; the other one still is.
func TestMembers_WatchStopStopsCalls(t *testing.T) {
	h := newFleet(t)
	s := h.store(nil, Options{})
	kept, _ := watchMembers(t, s)
	gone, stop := watchMembers(t, s)
	put(t, s, "web", docOne)
	kept.told(t, "kept", "web", 1, docOne)
	gone.told(t, "gone", "web", 1, docOne)
	stop()
	put(t, s, "web", docTwo)
	put(t, s, "api", docOne)
	// Both writes were made after stop: once kept is told of both, every
	// call they cause is over, and gone was not among them.
	kept.told(t, "kept", "api", 1, docOne)
	kept.told(t, "kept", "web", 2, docTwo)
	if n, m := gone.count("web"), gone.count("api"); n != 1 || m != 0 {
		t.Fatalf("the stopped watcher was called for web %d times, api %d times, after its stop (want 1, 0)", n, m)
	}
}

// With no change, an instance reads no document: every sync_interval it
// pings Redis (the marker), and the documents wait for an invalidation
// (issue 31: the fleet's load must not grow with instances × pools).
func TestMembers_NoReadsWithoutAChange(t *testing.T) {
	h := newFleet(t)
	ops := newOpCounter()
	s := h.store(func(c *Config) { c.SyncInterval = 50 * time.Millisecond }, Options{Observe: ops.observe})
	w, _ := watchMembers(t, s)
	for _, pool := range []string{"api", "db", "web"} {
		put(t, s, pool, docOne)
		w.told(t, "the watcher", pool, 1, docOne)
	}
	// quiet reports whether no document was read while Redis was checked
	// n times; a read the change itself caused (its own invalidation,
	// re-read) may still come first.
	quiet := func(n int) (reads int, ok bool) {
		reads, pings := ops.n("members_read"), ops.n("ping")
		deadline := time.Now().Add(20 * time.Second)
		for ops.n("ping") < pings+n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		return ops.n("members_read") - reads, ops.n("ping") >= pings+n
	}
	testnet.Eventually(t, "the writes' own invalidations are read", func() bool {
		n, _ := quiet(3)
		return n == 0
	})
	if n, checked := quiet(10); n != 0 || !checked {
		t.Fatalf("%d members reads during 10 checks of Redis with no change (the checks made: %v)", n, checked)
	}
}

// Two instances change one pool at once, each on the document it read:
// the second write, made on a version the first replaced, is refused
// (ErrMembersChanged) and writes nothing, so the first change is not
// lost; made again on the new document, it goes through. A base above
// what Redis holds (Redis lost its data) is no conflict.
func TestMembers_AChangeOnAnOlderDocumentIsRefused(t *testing.T) {
	h := newFleet(t)
	a, b := h.store(nil, Options{}), h.store(nil, Options{})
	put(t, a, "web", docOne)
	_, seen, err := b.MembersAt(h.ctx, "web")
	if err != nil || seen == 0 {
		t.Fatalf("B reads the document: version %d, %v", seen, err)
	}
	v2, err := a.PutMembers(h.ctx, "web", []byte(docTwo), seen)
	if err != nil {
		t.Fatalf("A's change on the version it knows: %v", err)
	}
	if _, err := b.PutMembers(h.ctx, "web", []byte(`[{"addr":"10.0.0.9:80"}]`), seen); !errors.Is(err, ErrMembersChanged) {
		t.Fatalf("B's change on the version A replaced: %v, want ErrMembersChanged", err)
	}
	if v, doc := h.rawMembers("web"); v != v2 || doc != docTwo {
		t.Fatalf("redis holds %d %q after B's refused change, want A's %d %q", v, doc, v2, docTwo)
	}
	if !b.Up() {
		t.Fatal("a refused change sent B apart from the fleet")
	}
	testnet.Eventually(t, "B learns A's change", func() bool {
		doc, v, err := b.MembersAt(h.ctx, "web")
		return err == nil && v == v2 && string(doc) == docTwo
	})
	if _, err := b.PutMembers(h.ctx, "web", []byte(docOne), v2); err != nil {
		t.Fatalf("B's change made again on A's version: %v", err)
	}

	if _, err := h.srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	// The Store may be apart for a moment as it finds the data lost: the
	// write waits for it, and must not be taken for a conflict.
	testnet.Eventually(t, "a change on a version Redis lost to be written", func() bool {
		_, err := a.PutMembers(h.ctx, "api", []byte(docOne), 7)
		if errors.Is(err, ErrMembersChanged) {
			t.Fatalf("a change on a version Redis lost: %v, want it written", err)
		}
		return err == nil
	})
}
