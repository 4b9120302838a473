package fleet

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// The trip quorum against a real redis-server: the vote script on its own
// (stores voting by hand), then breakers on three instances, then an
// instance apart from Redis.

// quorumStore is an instance named name on the harness's server with a
// trip quorum of q.
func (h *fleetHarness) quorumStore(name string, q int) *Store {
	h.t.Helper()
	return h.store(func(c *Config) { c.Instance, c.TripQuorum = name, q }, Options{})
}

// votes are the instance names in key's vote set, by the server's score.
func (h *fleetHarness) votes(key string) []string {
	h.t.Helper()
	v, err := h.srv.Do("ZRANGE", keyspace{prefix: testPrefix}.key(key, fieldVotes), "0", "-1")
	if err != nil {
		h.t.Fatalf("ZRANGE votes of %s: %v", key, err)
	}
	if v == "" || v == "(empty array)" {
		return nil
	}
	return strings.Split(v, "\n")
}

func vote(t *testing.T, s *Store, key string, seen uint64, window time.Duration) (breaker.State, bool, bool) {
	t.Helper()
	st, tripped, voted, err := s.Vote(context.Background(), key, seen, time.Minute, time.Minute, window)
	if err != nil {
		t.Fatalf("vote of %s at %d: %v", s.voter, seen, err)
	}
	return st, tripped, voted
}

// Two of three: one vote (renewed or not) leaves the breaker closed in
// Redis; the second instance's opens it, as a trip opens it, and spends
// the votes; a third vote at the old generation changes nothing.
func TestVote_TwoOfThreeOpenForTheFleet(t *testing.T) {
	h := newFleet(t)
	a, b, c := h.quorumStore("a", 2), h.quorumStore("b", 2), h.quorumStore("c", 2)
	const key = "web/10.0.9.1:80"

	for range 2 {
		st, tripped, voted := vote(t, a, key, 0, time.Minute)
		if tripped || !voted || st.Open || st.Generation != 0 {
			t.Fatalf("a's vote: tripped %v voted %v state %+v, want voted below the quorum, closed at 0", tripped, voted, st)
		}
	}
	if got := h.votes(key); len(got) != 1 || got[0] != "a" {
		t.Fatalf("votes %q after a voted twice, want [a]", got)
	}
	if raw := h.raw(key); raw.Open || raw.Gen != 0 {
		t.Fatalf("redis holds %+v after one instance's vote, want closed at 0", raw)
	}

	st, tripped, voted := vote(t, b, key, 0, time.Minute)
	if !tripped || voted || !st.Open || st.Generation != 1 || st.CooldownLeft <= 0 {
		t.Fatalf("b's vote: tripped %v voted %v state %+v, want the trip: open at 1 with its cooldown", tripped, voted, st)
	}
	if got := h.votes(key); got != nil {
		t.Fatalf("votes %q after the trip, want none (spent)", got)
	}
	if raw := h.raw(key); !raw.Open || raw.Gen != 1 || raw.OpenGen != 1 {
		t.Fatalf("redis holds %+v, want open at 1", raw)
	}

	st, tripped, voted = vote(t, c, key, 0, time.Minute)
	if tripped || voted || !st.Open || st.Generation != 1 {
		t.Fatalf("c's vote at the old generation: tripped %v voted %v state %+v, want refused (open at 1)", tripped, voted, st)
	}
	if got := h.votes(key); got != nil {
		t.Fatalf("votes %q: a vote on an open breaker was recorded", got)
	}
}

// A vote counts for the window it was cast with, on the server's clock: a
// vote older than the window is dropped and does not make the quorum.
func TestVote_VotesAgeOutOfTheWindow(t *testing.T) {
	h := newFleet(t)
	a, b := h.quorumStore("a", 2), h.quorumStore("b", 2)
	const key = "web/10.0.9.2:80"
	const window = 200 * time.Millisecond

	vote(t, a, key, 0, window)
	time.Sleep(2 * window) // a's vote is then older than the window, on any clock
	if _, tripped, voted := vote(t, b, key, 0, window); tripped || !voted {
		t.Fatalf("b's vote beside a's expired one: tripped %v voted %v, want voted below the quorum", tripped, voted)
	}
	if got := h.votes(key); len(got) != 1 || got[0] != "b" {
		t.Fatalf("votes %q, want [b]: a's aged out", got)
	}
	if raw := h.raw(key); raw.Open {
		t.Fatalf("redis holds %+v: opened on a vote out of the window", raw)
	}
}

// An instance whose own open closed withdraws its vote; a close, and a
// merge, end the votes of the generation they leave.
func TestVote_UnvoteCloseAndMergeEndVotes(t *testing.T) {
	h := newFleet(t)
	a, b := h.quorumStore("a", 2), h.quorumStore("b", 2)
	one := h.quorumStore("one", 1) // an instance still at quorum 1 (a rolling change)
	ctx := context.Background()

	const withdrawn = "web/10.0.9.3:80"
	vote(t, a, withdrawn, 0, time.Minute)
	if err := a.Unvote(ctx, withdrawn); err != nil {
		t.Fatal(err)
	}
	if _, tripped, _ := vote(t, b, withdrawn, 0, time.Minute); tripped {
		t.Fatal("opened by b's vote beside a's withdrawn one")
	}

	const closed = "web/10.0.9.4:80"
	vote(t, a, closed, 0, time.Minute)
	if _, ok, err := one.Trip(ctx, closed, 0, time.Minute, time.Minute); err != nil || !ok {
		t.Fatalf("quorum-1 trip: %v %v", ok, err)
	}
	if _, ok, err := one.Close(ctx, closed, 1); err != nil || !ok {
		t.Fatalf("close: %v %v", ok, err)
	}
	if got := h.votes(closed); got != nil {
		t.Fatalf("votes %q after the close, want none: they were of the generation before", got)
	}

	const merged = "web/10.0.9.5:80"
	vote(t, a, merged, 0, time.Minute)
	r := a.remote.Load()
	if _, _, err := r.merge(ctx, merged, breaker.State{Generation: 0}, mergeApart); err != nil {
		t.Fatal(err)
	}
	if got := h.votes(merged); got != nil {
		t.Fatalf("votes %q after a merge raised the generation, want none", got)
	}
}

// Quorum 1 is today's trip, to the command: one script call, no vote kept.
func TestVote_QuorumOneIsTheTrip(t *testing.T) {
	h := newFleet(t)
	ops := newOpCounter()
	s := h.store(func(c *Config) { c.Instance, c.TripQuorum = "a", 1 }, Options{Observe: ops.observe})
	const key = "web/10.0.9.6:80"
	st, tripped, voted := vote(t, s, key, 0, time.Minute)
	if !tripped || voted || !st.Open || st.Generation != 1 {
		t.Fatalf("quorum 1: tripped %v voted %v state %+v, want the trip", tripped, voted, st)
	}
	if n := ops.n("trip"); n != 1 {
		t.Fatalf("%d trip operations, want 1", n)
	}
	if v, err := h.srv.Do("EXISTS", keyspace{prefix: testPrefix}.key(key, fieldVotes)); err != nil || v != "0" {
		t.Fatalf("votes key exists (%q, %v) at quorum 1", v, err)
	}
	if err := s.Unvote(context.Background(), key); err != nil || ops.n("unvote") != 0 {
		t.Fatalf("unvote at quorum 1: %v, %d operations; want none", err, ops.n("unvote"))
	}
}

// quorumFleet is three instances with a trip quorum of 2 and a breaker each
// for key (one failure trips, cooldown short enough for a probe), running.
// probeOK says what each instance's probe finds.
type quorumFleet struct {
	h       *fleetHarness
	in      [3]*instance
	probeOK [3]atomic.Bool
	key     string
	// Probes of the fleet's open (not of an open alone): how many ran,
	// how many at most at once.
	fleetProbes, inFlight, maxInFlight atomic.Int32
}

func newQuorumFleet(t *testing.T, key string, cooldown time.Duration) *quorumFleet {
	h := newFleet(t)
	f := &quorumFleet{h: h, key: key}
	cfg := trips(1, cooldown, 4*cooldown)
	for i, name := range []string{"a", "b", "c"} {
		s := h.quorumStore(name, 2)
		f.in[i] = h.instance(name, s, key, cfg, func(o *breaker.Options) {
			o.SnapshotRefresh = 50 * time.Millisecond
			o.Owner = name
			o.Probe = func(context.Context) breaker.Result {
				// A probe of the fleet's open holds the fleet's lock; one
				// of an open alone does not.
				if owner, _ := h.srv.Do("GET", keyspace{prefix: testPrefix}.key(key, fieldProbe)); owner == name {
					f.fleetProbes.Add(1)
					n := f.inFlight.Add(1)
					defer f.inFlight.Add(-1)
					for m := f.maxInFlight.Load(); n > m && !f.maxInFlight.CompareAndSwap(m, n); m = f.maxInFlight.Load() {
					}
					time.Sleep(20 * time.Millisecond) // a dial takes a while: overlaps would show
				}
				if f.probeOK[i].Load() {
					return breaker.Success
				}
				return breaker.Failure
			}
		})
		h.start(nil, f.in[i])
	}
	return f
}

func isLocalOpen(st breaker.State) bool { return st.Open && st.LocalOnly }

// One instance's trip keeps the backend for the others and opens this
// instance's breaker alone; a second instance's makes the quorum and every
// instance, the first included, follows the fleet's open.
func TestQuorum_OneTripIsLocalTwoAreTheFleets(t *testing.T) {
	f := newQuorumFleet(t, "web/10.0.9.7:80", time.Minute)
	a, b, c := f.in[0], f.in[1], f.in[2]

	tripOn(t, a)
	st := waitState(t, a, "open here alone", isLocalOpen)
	if st.Generation != 0 || a.b.Allow() || a.ev.n("trip") != 1 {
		t.Fatalf("a: %+v allow %v trips %d, want a local open at generation 0 refusing dials", st, a.b.Allow(), a.ev.n("trip"))
	}
	if raw := f.h.raw(f.key); raw.Open {
		t.Fatalf("redis holds %+v after one instance's trip", raw)
	}
	for _, o := range []*instance{b, c} {
		if !o.b.Allow() || o.b.State().Open {
			t.Fatalf("%s stopped dials on a's trip below the quorum: %+v", o.name, o.b.State())
		}
	}

	tripOn(t, b)
	raw := f.h.raw(f.key)
	if !raw.Open || raw.Gen != 1 {
		t.Fatalf("redis holds %+v after two instances' trips, want open at 1", raw)
	}
	for _, o := range f.in {
		got := waitState(t, o, "follows the fleet's open", isOpenAt(1))
		if got.LocalOnly {
			t.Fatalf("%s still open alone beside the fleet's open: %+v", o.name, got)
		}
	}
}

// A local open probes by itself after its cooldown: a dial begun before
// its trip never closes it, a failed probe re-opens it and votes again
// (which alone makes no quorum), and its own successful probe closes it
// and withdraws the vote.
func TestQuorum_LocalOpenProbesAndClosesByItself(t *testing.T) {
	f := newQuorumFleet(t, "web/10.0.9.8:80", 300*time.Millisecond)
	a := f.in[0]
	early := a.b.Begin(breaker.KindForce) // before the trip

	tripOn(t, a)
	waitState(t, a, "open here alone", isLocalOpen)
	a.b.Done(early, breaker.Success)
	if !a.b.State().LocalOnly || a.ev.n("stale") < 1 {
		t.Fatalf("a pre-trip success: state %+v, stale %d; want still open alone, counted stale", a.b.State(), a.ev.n("stale"))
	}

	testnet.Eventually(t, "a's failed probe re-opens it alone", func() bool { return a.ev.n("reopen") >= 1 })
	if got := f.h.votes(f.key); len(got) != 1 || got[0] != "a" {
		t.Fatalf("votes %q after a's failed probe, want [a]", got)
	}
	if raw := f.h.raw(f.key); raw.Open {
		t.Fatalf("redis holds %+v: a's own re-vote made a quorum of one", raw)
	}

	f.probeOK[0].Store(true)
	waitState(t, a, "closed by its own probe", func(st breaker.State) bool { return !st.Open })
	if got := f.h.votes(f.key); got != nil {
		t.Fatalf("votes %q after a closed, want none (withdrawn)", got)
	}
	if a.ev.n("close") != 1 || !a.b.Allow() {
		t.Fatalf("a: %d closes, allow %v", a.ev.n("close"), a.b.Allow())
	}
}

// Apart from Redis, an instance with a quorum trips for itself alone and
// marks nothing to merge: on its return Redis is as the fleet left it.
func TestQuorum_ApartTripsAloneAndMergesNothing(t *testing.T) {
	h := newFleet(t)
	p := startProxy(t, h.srv.Addr)
	sa := h.store(func(c *Config) {
		c.RedisURL, c.Timeout, c.Instance, c.TripQuorum = p.URL(), outageTimeout, "a", 2
	}, Options{})
	const key = "web/10.0.9.9:80"
	cutOff(t, p, sa, key)

	st, tripped, voted := vote(t, sa, key, 0, time.Minute)
	if tripped || !voted || st.Open {
		t.Fatalf("apart: tripped %v voted %v state %+v, want voted, nothing opened", tripped, voted, st)
	}
	sa.mu.Lock()
	marked := len(sa.apart)
	sa.mu.Unlock()
	if marked != 0 {
		t.Fatalf("%d keys marked for the merge after a vote apart", marked)
	}
	p.Heal()
	rejoined(t, sa, "A rejoins")
	if raw := h.raw(key); raw.Open || raw.Gen != 0 {
		t.Fatalf("redis holds %+v after A's return, want closed at 0 as the fleet left it", raw)
	}
}

// Once the quorum makes the open the fleet's, it is probed as any open of
// the fleet: one probe at a time under the lock, the instance that was
// open alone included, and a success of a dial begun before the local
// trip closes nothing. A success then closes it for all, once.
func TestQuorum_TheFleetsOpenHasOneProbeAndNoStaleClose(t *testing.T) {
	f := newQuorumFleet(t, "web/10.0.9.10:80", 200*time.Millisecond)
	a, b := f.in[0], f.in[1]
	early := a.b.Begin(breaker.KindForce) // before any trip

	tripOn(t, a)
	tripOn(t, b)
	for _, o := range f.in {
		waitState(t, o, "follows the fleet's open", func(st breaker.State) bool { return st.Open && !st.LocalOnly })
	}
	a.b.Done(early, breaker.Success)
	testnet.Eventually(t, "a counts its pre-trip success stale", func() bool { return a.ev.n("stale") >= 1 })
	if raw := f.h.raw(f.key); !raw.Open {
		t.Fatalf("redis holds %+v after a pre-trip success", raw)
	}

	testnet.Eventually(t, "three failed probes of the fleet's open", func() bool { return f.fleetProbes.Load() >= 3 })
	for i := range f.probeOK {
		f.probeOK[i].Store(true)
	}
	for _, o := range f.in {
		waitState(t, o, "closed for all", func(st breaker.State) bool { return !st.Open })
	}
	if m := f.maxInFlight.Load(); m != 1 {
		t.Fatalf("%d probes of the fleet's open at once, want 1", m)
	}
	closes := 0
	for _, o := range f.in {
		closes += o.ev.n("close")
	}
	if closes != 1 {
		t.Fatalf("%d closes across the fleet, want 1", closes)
	}
	t.Logf("%d probes of the fleet's open, one at a time", f.fleetProbes.Load())
}

// Two processes of one instance (an upgrade's old and new, a restart)
// have different names but vote under one: their votes within a window
// count once, and make no quorum of two by themselves.
func TestVote_OneVoterAcrossProcessesCountsOnce(t *testing.T) {
	h := newFleet(t)
	same := func(name string) *Store {
		return h.store(func(c *Config) { c.Instance, c.Voter, c.TripQuorum = name, "host-a", 2 }, Options{})
	}
	old, upgraded, other := same("host-a-100"), same("host-a-200"), h.quorumStore("host-b", 2)
	const key = "web/10.0.9.9:80"
	if _, tripped, voted := vote(t, old, key, 0, time.Minute); tripped || !voted {
		t.Fatalf("the old process's vote: tripped %v voted %v", tripped, voted)
	}
	if _, tripped, voted := vote(t, upgraded, key, 0, time.Minute); tripped || !voted {
		t.Fatalf("the new process's vote: tripped %v voted %v; one host's two processes made the quorum of two", tripped, voted)
	}
	if got := h.votes(key); len(got) != 1 || got[0] != "host-a" {
		t.Fatalf("votes %q, want [host-a]", got)
	}
	if _, tripped, _ := vote(t, other, key, 0, time.Minute); !tripped {
		t.Fatal("a second host's vote did not make the quorum")
	}
}
