package breaker

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Rule 9: the trip quorum. quorumVotes is a fleet's vote table over one
// MemoryStore, kept as pkg/fleet's script keeps it (times on the store's
// clock, votes of the current generation within the window); each
// instance's Store is a voter on it.
type quorumVotes struct {
	*MemoryStore
	quorum int
	mu     sync.Mutex
	at     map[string]time.Time // voter -> when, of generation gen
	gen    uint64
}

type voter struct {
	*quorumVotes
	name string
}

var _ Quorum = voter{}

func (v voter) Vote(ctx context.Context, key string, seen uint64, cooldown, ttl, window time.Duration) (State, bool, bool, error) {
	q := v.quorumVotes
	q.mu.Lock()
	defer q.mu.Unlock()
	st, err := q.Read(ctx, key)
	if err != nil || st.Open || st.Generation != seen {
		return st, false, false, err
	}
	if q.gen != st.Generation {
		q.gen, q.at = st.Generation, map[string]time.Time{}
	}
	now := time.Now() // the synctest bubble's clock: the store's
	q.at[v.name] = now
	live := 0
	for _, t := range q.at {
		if now.Sub(t) < window {
			live++
		}
	}
	if live < q.quorum {
		return st, false, true, nil
	}
	clear(q.at)
	st, ok, err := q.Trip(ctx, key, seen, cooldown, ttl)
	return st, ok, false, err
}

func (v voter) Unvote(context.Context, string) error {
	v.mu.Lock()
	delete(v.at, v.name)
	v.mu.Unlock()
	return nil
}

func (v voter) voted() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.at[v.name]
	return ok
}

// quorumFleet is n breakers, one per voter, on one store with quorum q.
func quorumFleet(t *testing.T, n, q int, cfg Config, probe *fakeProbe, ev *recorder) ([]*Breaker, []voter, *MemoryStore) {
	t.Helper()
	votes := &quorumVotes{MemoryStore: NewMemoryStore(nil), quorum: q, at: map[string]time.Time{}}
	var bs []*Breaker
	var vs []voter
	for i := range n {
		v := voter{votes, string(rune('a' + i))}
		b, err := New(testKey, cfg.withDefaults(), v, Options{Events: ev.events(), Probe: probe.probe, Rand: func() float64 { return 0.5 }})
		if err != nil {
			t.Fatal(err)
		}
		bs, vs = append(bs, b), append(vs, v)
	}
	return bs, vs, votes.MemoryStore
}

func TestRule9_BelowTheQuorumOpensHereAloneAndTheQuorumForAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := newRecorder()
		bs, _, store := quorumFleet(t, 3, 2, Config{Failures: 2, Window: time.Minute, Cooldown: time.Minute}, &fakeProbe{}, ev)
		trip(t, bs[0])
		if st := bs[0].State(); !st.LocalOnly || st.Generation != 0 || st.CooldownLeft != time.Minute || bs[0].Allow() {
			t.Fatalf("a below the quorum: %+v allow %v, want open alone at generation 0 for a cooldown", st, bs[0].Allow())
		}
		if st, _ := store.Read(context.Background(), testKey); st.Open || st.Generation != 0 {
			t.Fatalf("the store after one vote: %+v", st)
		}
		if !bs[1].Allow() || !bs[2].Allow() {
			t.Fatal("another instance stopped dialling on a's trip below the quorum")
		}
		trip(t, bs[1])
		st, _ := store.Read(context.Background(), testKey)
		if !st.Open || st.Generation != 1 {
			t.Fatalf("the store after two votes: %+v, want open at 1", st)
		}
		for i, b := range bs {
			if err := b.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := b.State(); !got.Open || got.LocalOnly || got.Generation != 1 {
				t.Fatalf("instance %d after the quorum: %+v, want the fleet's open at 1", i, got)
			}
		}
		if ev.n("trip") != 2 {
			t.Fatalf("%d trip events, want 2 (a's alone, b's for the fleet)", ev.n("trip"))
		}
	})
}

// A local open closes only on a success of a dial begun after it, and
// withdraws its vote; the window starts empty after it.
func TestRule9_LocalOpenClosesOnlyOnEvidenceFromAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := newRecorder()
		bs, vs, _ := quorumFleet(t, 2, 2, Config{Failures: 2, Window: time.Minute, Cooldown: time.Minute}, &fakeProbe{}, ev)
		a := bs[0]
		before := a.Begin(KindForce)
		trip(t, a)
		a.Done(before, Success)
		if !a.State().LocalOnly || ev.n("stale") != 1 {
			t.Fatalf("a success of a dial begun before the local trip: %+v, stale %d; want still open alone, stale", a.State(), ev.n("stale"))
		}
		dial(a, KindClient, Success) // raced the trip: ignored
		dial(a, KindForce, Success)
		if st := a.State(); st.Open || !a.Allow() || vs[0].voted() || ev.n("close") != 1 {
			t.Fatalf("after a post-trip force-try success: %+v allow %v voted %v closes %d", st, a.Allow(), vs[0].voted(), ev.n("close"))
		}
		dial(a, KindClient, Failure)
		if a.State().Open {
			t.Fatal("one failure after the local close tripped: the window kept failures from before")
		}
	})
}

// The probe of a local open runs after its cooldown without a fleet lock;
// a failure re-opens it with the doubled cooldown, the alert, and a new
// vote, and a success closes it.
func TestRule9_LocalProbeReopensDoubledAndVotesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := newRecorder()
		probe := &fakeProbe{}
		probe.answer(Failure, Success)
		bs, vs, store := quorumFleet(t, 2, 2, Config{Failures: 1, Window: time.Hour, Cooldown: 10 * time.Second, MaxCooldown: time.Minute}, probe, ev)
		a := bs[0]
		// Another instance holds the fleet's probe lock all along: the
		// local probe does not need it.
		if ok, _ := store.AcquireProbe(context.Background(), testKey, "other", time.Hour); !ok {
			t.Fatal("lock")
		}
		stop := run(a)
		defer stop()
		trip(t, a)
		if err := vs[0].Unvote(context.Background(), testKey); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		st := a.State()
		if probe.calls.Load() != 1 || !st.LocalOnly || st.Cooldown != 20*time.Second || ev.n("reopen") != 1 || ev.n("probe_failure") != 1 {
			t.Fatalf("after the failed local probe: %+v, %d probes, reopen %d alerts %d", st, probe.calls.Load(), ev.n("reopen"), ev.n("probe_failure"))
		}
		if !vs[0].voted() {
			t.Fatal("the failed local probe did not vote again")
		}
		time.Sleep(20*time.Second + time.Millisecond)
		synctest.Wait()
		if st := a.State(); st.Open || probe.calls.Load() != 2 || vs[0].voted() {
			t.Fatalf("after the second local probe: %+v, %d probes, voted %v", st, probe.calls.Load(), vs[0].voted())
		}
	})
}

// A reload's breaker takes over the local open and its local generation:
// a dial the old one handed out before the trip stays stale.
func TestRule9_InheritCarriesTheLocalOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := newRecorder()
		bs, _, _ := quorumFleet(t, 2, 2, Config{Failures: 1, Window: time.Minute, Cooldown: time.Minute}, &fakeProbe{}, ev)
		old, next := bs[0], bs[1] // same key; next plays the reload's breaker
		before := old.Begin(KindForce)
		trip(t, old)
		next.Inherit(old)
		old.HandOver(next)
		if st := next.State(); !st.LocalOnly {
			t.Fatalf("the reload's breaker: %+v, want the local open carried", st)
		}
		old.Done(before, Success)
		if !next.State().LocalOnly || ev.n("stale") != 1 {
			t.Fatalf("a pre-trip success handed over closed the local open: %+v", next.State())
		}
	})
}
