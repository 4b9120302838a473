package fleet

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// watchKey counts the calls of a Watch on key.
func watchKey(t *testing.T, s *Store, key string) *atomic.Int64 {
	var n atomic.Int64
	stop := s.Watch(key, func() { n.Add(1) })
	t.Cleanup(stop)
	return &n
}

func readShared(t *testing.T, s *Store, key string) Shared {
	t.Helper()
	sh, err := s.ReadShared(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// The records sit in the backend's hash tag, under the field names
// docs/fleet.md gives.
func TestShared_Keys(t *testing.T) {
	ks := keyspace{prefix: "l4lb:"}
	for field, want := range map[string]string{fieldDrain: "l4lb:{web/10.0.0.1:80}:drain", fieldWeight: "l4lb:{web/10.0.0.1:80}:weight"} {
		if got := ks.key("web/10.0.0.1:80", field); got != want {
			t.Errorf("%s key %q, want %q", field, got, want)
		}
		if k, f, ok := ks.breakerField(want); !ok || k != "web/10.0.0.1:80" || f != field {
			t.Errorf("%q parses as breaker key %q field %q %v: its invalidation would reach no watcher", want, k, f, ok)
		}
	}
}

// A drain made on A reaches B by invalidation, with one deadline on
// Redis's clock; the undrain does too, at a higher version.
func TestShared_DrainOnOneReachesAnother(t *testing.T) {
	h := newFleet(t)
	a, b := h.store(nil, Options{}), h.store(nil, Options{})
	const key = "web/10.0.8.1:80"
	ctx := context.Background()
	if sh := readShared(t, b, key); sh.Drain.Version != 0 || sh.Drain.Drained {
		t.Fatalf("B reads %+v before any drain", sh)
	}
	calls := watchKey(t, b, key)
	before := time.Now()
	d, err := a.ShareDrain(ctx, key, time.Minute)
	if err != nil || !d.Drained || d.Version == 0 {
		t.Fatalf("A drains: %+v %v", d, err)
	}
	testnet.Eventually(t, "B's watcher is told", func() bool { return calls.Load() > 0 })
	got := readShared(t, b, key).Drain
	if !got.Drained || got.Version != d.Version || got.Timeout != time.Minute {
		t.Fatalf("B reads %+v, want A's %+v", got, d)
	}
	// Generous bounds: the deadline is a minute after the write, on
	// Redis's clock, turned into B's.
	if got.Deadline.Before(before.Add(50*time.Second)) || got.Deadline.After(time.Now().Add(70*time.Second)) {
		t.Fatalf("B's deadline %v is not about a minute after %v", got.Deadline, before)
	}
	if v, err := h.srv.Do("GET", testPrefix+"{"+key+"}:drain"); err != nil || !strings.HasPrefix(v, decimal(int64(d.Version))+" 1 ") || !strings.HasSuffix(v, " 60000") {
		t.Fatalf("redis holds %q %v, want \"VERSION 1 DEADLINE_MS 60000\"", v, err)
	}

	u, err := b.ShareUndrain(ctx, key)
	if err != nil || u.Drained || u.Version <= d.Version {
		t.Fatalf("B undrains: %+v %v (after version %d)", u, err, d.Version)
	}
	testnet.Eventually(t, "A reads the undrain", func() bool {
		sh := readShared(t, a, key)
		return !sh.Drain.Drained && sh.Drain.Version == u.Version
	})
}

// A weight set on A reaches B with the file's weight it replaced; a
// weight equal to the file's is a reset, at a higher version.
func TestShared_WeightAndReset(t *testing.T) {
	h := newFleet(t)
	a, b := h.store(nil, Options{}), h.store(nil, Options{})
	const key = "web/10.0.8.2:80"
	ctx := context.Background()
	readShared(t, b, key) // B tracks the keys
	calls := watchKey(t, b, key)
	w, err := a.ShareWeight(ctx, key, 3, 1)
	if err != nil || !w.Set || w.Weight != 3 || w.Configured != 1 {
		t.Fatalf("A sets: %+v %v", w, err)
	}
	testnet.Eventually(t, "B is told", func() bool { return calls.Load() > 0 })
	if got := readShared(t, b, key).Weight; got != w {
		t.Fatalf("B reads %+v, want %+v", got, w)
	}
	r, err := a.ShareWeight(ctx, key, 1, 1)
	if err != nil || r.Set || r.Version <= w.Version {
		t.Fatalf("A resets: %+v %v", r, err)
	}
	testnet.Eventually(t, "B reads the reset", func() bool { return readShared(t, b, key).Weight == r })
	if _, err := a.ShareWeight(ctx, key, -1, 1); err == nil {
		t.Fatal("a negative weight is taken")
	}
}

// apartPair is A, through a proxy now cut (A decides locally), and B,
// on one Redis.
func apartPair(t *testing.T, key string) (p *cutProxy, a, b *Store) {
	t.Helper()
	h := newFleet(t)
	p = startProxy(t, h.srv.Addr)
	a = h.store(func(c *Config) { c.RedisURL, c.Timeout = p.URL(), outageTimeout }, Options{})
	b = h.store(nil, Options{})
	p.Cut()
	testnet.Eventually(t, "A decides locally", func() bool {
		_, _ = a.Read(context.Background(), key)
		return !a.Up()
	})
	return p, a, b
}

// Apart: a drain is kept and merged back when Redis answers (drained
// wins); an undrain and a weight are refused, and change nothing.
func TestShared_ApartDrainMergedWeightRefused(t *testing.T) {
	const key = "web/10.0.8.3:80"
	p, a, b := apartPair(t, key)
	ctx := context.Background()
	if _, err := a.ShareWeight(ctx, key, 2, 1); !errors.Is(err, ErrStoreDown) {
		t.Fatalf("weight apart: %v, want ErrStoreDown", err)
	}
	if _, err := a.ShareUndrain(ctx, key); !errors.Is(err, ErrStoreDown) {
		t.Fatalf("undrain apart: %v, want ErrStoreDown", err)
	}
	d, err := a.ShareDrain(ctx, key, 30*time.Second)
	if err != nil || !d.Drained || d.Version != 0 {
		t.Fatalf("drain apart: %+v %v; want kept locally, at the version known (none)", d, err)
	}
	if sh := readShared(t, a, key); !sh.Drain.Drained {
		t.Fatalf("A reads %+v apart, want its drain", sh)
	}
	if sh := readShared(t, b, key); sh.Drain.Drained || sh.Weight.Set {
		t.Fatalf("B reads %+v while A is apart: A's drain or refused weight reached redis", sh)
	}
	p.Heal()
	rejoined(t, a, "A rejoins")
	testnet.Eventually(t, "B reads A's merged drain", func() bool { return readShared(t, b, key).Drain.Drained })
	got := readShared(t, b, key).Drain
	if left := time.Until(got.Deadline); left <= 0 || left > 30*time.Second {
		t.Fatalf("merged deadline %v from now, want within A's 30s", left)
	}
	if sh := readShared(t, a, key); sh.Drain != got && sh.Drain.Version != got.Version {
		t.Fatalf("A reads %+v after the merge, B %+v", sh.Drain, got)
	}
}

// A drain made on B while A was apart and had drained too keeps B's
// record (and deadline): drained wins, and Redis's drained record stays.
func TestShared_MergeKeepsADrainedRecord(t *testing.T) {
	const key = "web/10.0.8.4:80"
	p, a, b := apartPair(t, key)
	ctx := context.Background()
	if _, err := a.ShareDrain(ctx, key, time.Second); err != nil {
		t.Fatal(err)
	}
	bd, err := b.ShareDrain(ctx, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p.Heal()
	rejoined(t, a, "A rejoins")
	if got := readShared(t, a, key).Drain; got.Version != bd.Version || got.Timeout != time.Hour {
		t.Fatalf("A reads %+v after the merge, want B's record %+v", got, bd)
	}
}

// Redis emptied (FLUSHALL): the instances' copies are written back at
// their versions, and reads never answer "none" meanwhile.
func TestShared_RedisEmptiedGetsRecordsBack(t *testing.T) {
	h := newFleet(t)
	a, b := h.store(nil, Options{}), h.store(nil, Options{})
	const key = "web/10.0.8.5:80"
	ctx := context.Background()
	d, err := a.ShareDrain(ctx, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.ShareWeight(ctx, key, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "B knows both", func() bool {
		sh := readShared(t, b, key)
		return sh.Drain.Version == d.Version && sh.Weight == w
	})
	if _, err := h.srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	sh := readShared(t, b, key)
	if !sh.Drain.Drained || sh.Drain.Version != d.Version || sh.Weight != w {
		t.Fatalf("B reads %+v right after the flush, want its copies", sh)
	}
	// Each read (the caller reads again when its watcher is told of the
	// flush) writes back what Redis is behind.
	testnet.Eventually(t, "redis holds both records again", func() bool {
		readShared(t, b, key)
		dv, err1 := h.srv.Do("GET", testPrefix+"{"+key+"}:drain")
		wv, err2 := h.srv.Do("GET", testPrefix+"{"+key+"}:weight")
		return err1 == nil && err2 == nil && strings.HasPrefix(dv, decimal(int64(d.Version))+" 1 ") &&
			wv == decimal(int64(w.Version))+" 1 5 1"
	})
	pastTheLoss(t, h, a, b)
	u, err := a.ShareUndrain(ctx, key)
	if err != nil || u.Version <= d.Version {
		t.Fatalf("undrain after the loss: %+v %v, want a version above %d", u, err, d.Version)
	}
	testnet.Eventually(t, "B reads the undrain", func() bool { return !readShared(t, b, key).Drain.Drained })
}

// A record no instance wrote is an error of that key alone.
func TestShared_UnusableRecord(t *testing.T) {
	h := newFleet(t)
	a := h.store(nil, Options{})
	const key = "web/10.0.8.6:80"
	if _, err := h.srv.Do("SET", testPrefix+"{"+key+"}:weight", "garbage"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadShared(context.Background(), key); !errors.Is(err, errBadReply) || !strings.Contains(err.Error(), ":weight") {
		t.Fatalf("read: %v, want a bad reply naming the key", err)
	}
	if !a.Up() {
		t.Fatal("one unusable key took the instance apart")
	}
}

// calls is how many times the server ran cmd (INFO commandstats).
func calls(t *testing.T, h *fleetHarness, cmd string) int {
	t.Helper()
	info, err := h.srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			v, _ := strconv.Atoi(n)
			return v
		}
	}
	return 0
}

// Reading a record that did not change costs Redis (next to) nothing: the
// GETs are answered by the client-side cache, and a drain's deadline is
// taken from the copy (no TIME).
func TestShared_UnchangedReadsCostRedisNothing(t *testing.T) {
	h := newFleet(t)
	a, b := h.store(nil, Options{}), h.store(nil, Options{})
	const key = "web/10.0.8.7:80"
	ctx := context.Background()
	d, err := a.ShareDrain(ctx, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "B reads the drain", func() bool { return readShared(t, b, key).Drain.Version == d.Version })
	first := readShared(t, b, key).Drain
	gets, times := calls(t, h, "get"), calls(t, h, "time")
	for range 20 {
		if got := readShared(t, b, key).Drain; got != first {
			t.Fatalf("read %+v, then %+v: the deadline moved", first, got)
		}
	}
	// A GET or two may still go out: a cached read in flight when the
	// write's invalidation arrived is not cached. Uncached, 20 reads are
	// 40 GETs and 20 TIMEs.
	if g, tm := calls(t, h, "get"), calls(t, h, "time"); g-gets > 2 || tm != times {
		t.Fatalf("20 reads of an unchanged record made %d GET and %d TIME at the server, want at most 2 and none", g-gets, tm-times)
	}
}
