package storetest

import (
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// testProbeLockHasOneOwner: SET NX semantics. One live lock per key; not
// re-entrant; only its owner's release drops it; releasing a lock one does
// not hold is not an error.
func testProbeLockHasOneOwner(e *env) {
	k := e.key("k")
	e.mustAcquire(k, "a", true)
	e.mustAcquire(k, "b", false)
	e.mustAcquire(k, "a", false) // not re-entrant: one probe at a time
	e.release(k, "b")            // not the owner: no effect
	e.mustAcquire(k, "b", false)
	e.release(k, "a")
	e.mustAcquire(k, "b", true)
	e.mustAcquire(k, "a", false)
	e.release(k, "b")
	e.release(k, "b") // released twice: no error
	e.release(k, "c") // never held: no error
	e.mustAcquire(k, "a", true)
	e.mustAcquire(e.key("other"), "b", true) // locks are per key
}

// testProbeLockExpires: a lock whose TTL has passed is free, so a crashed
// prober cannot wedge the backend; and the crashed prober's late release
// does not drop the lock its successor took.
func testProbeLockExpires(e *env) {
	k := e.key("k")
	const ttl = 150 * time.Millisecond
	if !e.acquire(k, "a", ttl) {
		e.t.Fatal("AcquireProbe by a on a free key refused")
	}
	if e.acquire(k, "b", longTTL) {
		e.t.Fatal("AcquireProbe by b succeeded while a's 150ms lock is live")
	}
	e.eventually("a's 150ms probe lock expired (b acquires)", func() bool { return e.acquire(k, "b", longTTL) })
	e.release(k, "a") // a comes back late: b's lock is not a's
	e.mustAcquire(k, "c", false)
	e.mustAcquire(k, "a", false)
	e.release(k, "b")
	e.mustAcquire(k, "c", true)
}

// testProbeLockApart: the probe lock is not breaker state. Holding it shows
// in no Read, does not stop a transition, and no transition, disable or
// enable drops it.
func testProbeLockApart(e *env) {
	k := e.key("k")
	e.mustAcquire(k, "a", true)
	if st := e.read(k); st != (breaker.State{}) {
		e.t.Fatalf("Read with only a probe lock: %+v, want the zero State", st)
	}
	steps := []struct {
		name string
		do   func() bool
	}{
		{"Trip(seen 0)", func() bool { _, ok := e.trip(k, 0, tripCooldown, tripTTL); return ok }},
		{"Reopen(gen 1)", func() bool { _, ok := e.reopen(k, 1, reopenCooldown, reopenTTL); return ok }},
		{"Disable", func() bool { e.disable(k); return true }},
		{"Close(gen 2)", func() bool { _, ok := e.close(k, 2); return ok }},
		{"Enable", func() bool { e.enable(k); return true }},
	}
	for _, s := range steps {
		if !s.do() {
			e.t.Fatalf("%s refused while a probe lock is held", s.name)
		}
		if e.acquire(k, "b", longTTL) {
			e.t.Fatalf("after %s: the probe lock of a was dropped", s.name)
		}
	}
	e.checkRead("after the transitions", k, closedAt(3))
	e.release(k, "a")
	e.checkRead("after the release", k, closedAt(3))
	e.mustAcquire(k, "b", true)
}
