package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// The cooldowns and TTLs of the compare-and-set tests: a trip's and a
// re-open's differ, so a state shows which of them made its open entry.
const (
	tripCooldown   = 1 * time.Second
	tripTTL        = longTTL
	reopenCooldown = 2 * time.Second
	reopenTTL      = 8 * time.Second
)

// casOp is one compare-and-set transition on a key.
type casOp struct {
	name string
	do   func(e *env, key string) (breaker.State, bool)
}

func tripAt(seen uint64) casOp {
	return casOp{fmt.Sprintf("Trip(seen %d)", seen), func(e *env, key string) (breaker.State, bool) {
		return e.trip(key, seen, tripCooldown, tripTTL)
	}}
}

func closeAt(gen uint64) casOp {
	return casOp{fmt.Sprintf("Close(gen %d)", gen), func(e *env, key string) (breaker.State, bool) {
		return e.close(key, gen)
	}}
}

func reopenAt(gen uint64) casOp {
	return casOp{fmt.Sprintf("Reopen(gen %d)", gen), func(e *env, key string) (breaker.State, bool) {
		return e.reopen(key, gen, reopenCooldown, reopenTTL)
	}}
}

// testCompareAndSet is the table of the three compare-and-set transitions:
// each applies only at the generation it names and only in the state it
// leaves (Trip: closed; Close and Reopen: open), and every call, made or
// refused, returns the whole state after it, the same a Read then sees.
func testCompareAndSet(t *testing.T, newEnv func(t *testing.T) *env) {
	tests := []struct {
		name   string
		setup  []casOp
		op     casOp
		wantOK bool
		want   want
	}{
		{"trip when closed at seen", nil, tripAt(0), true, openAt(1, tripCooldown, tripTTL)},
		{"trip when closed again at seen", []casOp{tripAt(0), closeAt(1)}, tripAt(2), true, openAt(3, tripCooldown, tripTTL)},
		{"trip with an old seen", []casOp{tripAt(0), closeAt(1)}, tripAt(0), false, closedAt(2)},
		{"trip with a seen not reached yet", nil, tripAt(1), false, closedAt(0)},
		{"trip when already open", []casOp{tripAt(0)}, tripAt(1), false, openAt(1, tripCooldown, tripTTL)},
		{"trip when already open at the seen before", []casOp{tripAt(0)}, tripAt(0), false, openAt(1, tripCooldown, tripTTL)},
		{"close at the open generation", []casOp{tripAt(0)}, closeAt(1), true, closedAt(2)},
		{"close at the re-opened generation", []casOp{tripAt(0), reopenAt(1)}, closeAt(2), true, closedAt(3)},
		{"close at an old generation", []casOp{tripAt(0), reopenAt(1)}, closeAt(1), false, openAt(2, reopenCooldown, reopenTTL)},
		{"close when never tripped", nil, closeAt(0), false, closedAt(0)},
		{"close when closed at the current generation", []casOp{tripAt(0), closeAt(1)}, closeAt(2), false, closedAt(2)},
		{"close when closed at the last open generation", []casOp{tripAt(0), closeAt(1)}, closeAt(1), false, closedAt(2)},
		{"reopen at the open generation", []casOp{tripAt(0)}, reopenAt(1), true, openAt(2, reopenCooldown, reopenTTL)},
		{"reopen at an old generation", []casOp{tripAt(0), reopenAt(1)}, reopenAt(1), false, openAt(2, reopenCooldown, reopenTTL)},
		{"reopen when never tripped", nil, reopenAt(0), false, closedAt(0)},
		{"reopen when closed at the last open generation", []casOp{tripAt(0), closeAt(1)}, reopenAt(1), false, closedAt(2)},
		{"reopen when closed at the current generation", []casOp{tripAt(0), closeAt(1)}, reopenAt(2), false, closedAt(2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			k := e.key("k")
			for _, o := range tc.setup {
				if _, ok := o.do(e, k); !ok {
					t.Fatalf("setup %s: refused", o.name)
				}
			}
			st, ok := tc.op.do(e, k)
			e.checkOK(tc.op.name, ok, tc.wantOK)
			e.check(tc.op.name, st, tc.want)
			e.checkRead(tc.op.name, k, tc.want)
		})
	}
}

// testGenerationOnlyGoesUp: every transition adds one to the generation,
// refused ones leave it, and a close deletes the open entry, not the
// counter.
func testGenerationOnlyGoesUp(e *env) {
	k := e.key("k")
	var gen uint64
	for i := range 50 {
		st, ok := e.trip(k, gen, tripCooldown, tripTTL)
		e.checkOK(fmt.Sprintf("cycle %d: Trip", i), ok, true)
		gen++
		e.check(fmt.Sprintf("cycle %d: Trip", i), st, openAt(gen, tripCooldown, tripTTL))

		st, ok = e.reopen(k, gen, reopenCooldown, reopenTTL)
		e.checkOK(fmt.Sprintf("cycle %d: Reopen", i), ok, true)
		gen++
		e.check(fmt.Sprintf("cycle %d: Reopen", i), st, openAt(gen, reopenCooldown, reopenTTL))

		// Stale calls change nothing, in particular not the generation.
		if i > 0 {
			st, ok = e.trip(k, gen-3, tripCooldown, tripTTL)
			e.checkOK(fmt.Sprintf("cycle %d: stale Trip", i), ok, false)
			e.check(fmt.Sprintf("cycle %d: stale Trip", i), st, openAt(gen, reopenCooldown, reopenTTL))
		}
		st, ok = e.close(k, gen-1)
		e.checkOK(fmt.Sprintf("cycle %d: stale Close", i), ok, false)
		e.check(fmt.Sprintf("cycle %d: stale Close", i), st, openAt(gen, reopenCooldown, reopenTTL))

		st, ok = e.close(k, gen)
		e.checkOK(fmt.Sprintf("cycle %d: Close", i), ok, true)
		gen++
		e.check(fmt.Sprintf("cycle %d: Close", i), st, closedAt(gen))
		e.checkRead(fmt.Sprintf("cycle %d: Close", i), k, closedAt(gen))
	}
	if gen != 150 {
		e.t.Fatalf("generation after 50 cycles = %d, want 150", gen)
	}
}

// testGenerationOutlivesTTLs: the counter is not a TTL key. Neither the
// cooldown running out nor time passing after a close takes it away.
func testGenerationOutlivesTTLs(e *env) {
	k := e.key("k")
	const ttl = 100 * time.Millisecond
	e.mustTrip(k, 0, tripCooldown, ttl)
	e.eventually("cooldown of a 100ms TTL run out", func() bool { return e.read(k).CooldownLeft == 0 })
	e.checkRead("cooldown run out", k, openAt(1, tripCooldown, 0))
	st, ok := e.close(k, 1)
	e.checkOK("Close(gen 1) after the cooldown ran out", ok, true)
	e.check("Close(gen 1) after the cooldown ran out", st, closedAt(2))
	e.h.Elapse(3 * ttl)
	e.checkRead("300ms after the close", k, closedAt(2))
	st, ok = e.trip(k, 0, tripCooldown, tripTTL)
	e.checkOK("Trip(seen 0) after the TTLs", ok, false)
	e.check("Trip(seen 0) after the TTLs", st, closedAt(2))
	st, ok = e.trip(k, 2, tripCooldown, tripTTL)
	e.checkOK("Trip(seen 2) after the TTLs", ok, true)
	e.check("Trip(seen 2) after the TTLs", st, openAt(3, tripCooldown, tripTTL))
}
