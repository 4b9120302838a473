package storetest

import (
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// testCooldownIsTimeRemaining: Cooldown is the nominal cooldown as given,
// CooldownLeft the TTL as time remaining, which shrinks as store time
// passes while nothing else in the state changes.
func testCooldownIsTimeRemaining(e *env) {
	k := e.key("k")
	st, ok := e.trip(k, 0, tripCooldown, tripTTL) // nominal 1s, TTL 10s
	e.checkOK("Trip(seen 0)", ok, true)
	e.check("Trip(seen 0)", st, openAt(1, tripCooldown, tripTTL))
	prev := e.read(k)
	e.check("Read after Trip", prev, openAt(1, tripCooldown, tripTTL))

	const d = 200 * time.Millisecond
	for range 2 {
		e.h.Elapse(d)
		st = e.read(k)
		if st.Generation != 1 || !st.Open || st.Cooldown != tripCooldown || st.Disabled {
			e.t.Fatalf("after %v more: state %+v, want generation 1, open, cooldown %v", d, st, tripCooldown)
		}
		if st.CooldownLeft <= 0 || st.CooldownLeft > prev.CooldownLeft-d/2 {
			e.t.Fatalf("after %v more: CooldownLeft %v, want in (0, %v] (was %v)",
				d, st.CooldownLeft, prev.CooldownLeft-d/2, prev.CooldownLeft)
		}
		prev = st
	}
}

// testCooldownRunsOut: a cooldown whose TTL has passed reads CooldownLeft 0
// and never comes back, while the entry stays open at its generation with
// its nominal cooldown until a Close or Reopen; a Reopen then gives a fresh
// TTL.
func testCooldownRunsOut(e *env) {
	k := e.key("k")
	const ttl = 150 * time.Millisecond
	e.mustTrip(k, 0, tripCooldown, ttl)
	prev := ttl
	e.eventually("cooldown of a 150ms TTL run out", func() bool {
		st := e.read(k)
		if st.Generation != 1 || !st.Open || st.Cooldown != tripCooldown || st.Disabled {
			e.t.Fatalf("while the cooldown runs: state %+v, want generation 1, open, cooldown %v", st, tripCooldown)
		}
		if st.CooldownLeft < 0 || st.CooldownLeft > prev {
			e.t.Fatalf("while the cooldown runs: CooldownLeft %v after %v", st.CooldownLeft, prev)
		}
		prev = st.CooldownLeft
		return st.CooldownLeft == 0
	})
	e.checkRead("cooldown run out", k, openAt(1, tripCooldown, 0))
	e.h.Elapse(ttl)
	e.checkRead("cooldown run out, 150ms later", k, openAt(1, tripCooldown, 0))

	// Run out is not closed: the breaker cannot trip again.
	st, ok := e.trip(k, 1, tripCooldown, tripTTL)
	e.checkOK("Trip(seen 1) with the cooldown run out", ok, false)
	e.check("Trip(seen 1) with the cooldown run out", st, openAt(1, tripCooldown, 0))

	st, ok = e.reopen(k, 1, reopenCooldown, longTTL)
	e.checkOK("Reopen(gen 1) with the cooldown run out", ok, true)
	e.check("Reopen(gen 1) with the cooldown run out", st, openAt(2, reopenCooldown, longTTL))
	e.checkRead("Reopen(gen 1) with the cooldown run out", k, openAt(2, reopenCooldown, longTTL))
}

// testReopenReplacesCooldownAndTTL: a Reopen's cooldown and TTL replace the
// entry's, whether longer or shorter, and the nominal cooldown is not tied
// to the TTL.
func testReopenReplacesCooldownAndTTL(e *env) {
	k := e.key("k")
	e.mustTrip(k, 0, tripCooldown, longTTL)
	const shorter = 5 * time.Second
	st, ok := e.reopen(k, 1, 4*time.Second, shorter)
	e.checkOK("Reopen(gen 1) with a shorter TTL", ok, true)
	e.check("Reopen(gen 1) with a shorter TTL", st, openAt(2, 4*time.Second, shorter))
	e.checkRead("Reopen(gen 1) with a shorter TTL", k, openAt(2, 4*time.Second, shorter))

	const short = 200 * time.Millisecond
	st, ok = e.reopen(k, 2, 8*time.Second, short)
	e.checkOK("Reopen(gen 2) with a 200ms TTL", ok, true)
	if st.Generation != 3 || !st.Open || st.Cooldown != 8*time.Second || st.CooldownLeft <= 0 || st.CooldownLeft > short {
		e.t.Fatalf("Reopen(gen 2) with a 200ms TTL: state %+v, want generation 3, open, cooldown 8s, CooldownLeft in (0, %v]", st, short)
	}
	e.eventually("cooldown of a 200ms TTL run out", func() bool { return e.read(k).CooldownLeft == 0 })
	e.checkRead("re-opened cooldown run out", k, openAt(3, 8*time.Second, 0))

	st, ok = e.reopen(k, 3, 16*time.Second, longTTL)
	e.checkOK("Reopen(gen 3)", ok, true)
	e.check("Reopen(gen 3)", st, openAt(4, 16*time.Second, longTTL))
}

// testReadUnknownKey: a key nothing was ever done to reads as the zero
// State, without an error, also when other keys are set.
func testReadUnknownKey(e *env) {
	if st := e.read(e.key("unknown")); st != (breaker.State{}) {
		e.t.Fatalf("Read of an unknown key: %+v, want the zero State", st)
	}
	other := e.key("other")
	e.mustTrip(other, 0, tripCooldown, tripTTL)
	e.disable(other)
	e.acquire(other, "a", longTTL)
	if st := e.read(e.key("unknown")); st != (breaker.State{}) {
		e.t.Fatalf("Read of an unknown key with another key set: %+v, want the zero State", st)
	}
}
