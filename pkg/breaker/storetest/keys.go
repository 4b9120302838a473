package storetest

import "github.com/l4lb/l4lb/pkg/breaker"

// testKeysAreIndependent: transitions, disables and probe locks of one key
// never change another, including a key the first is a prefix of.
func testKeysAreIndependent(e *env) {
	a, b := e.key("a"), e.key("a/b")
	zero := breaker.State{}

	e.mustTrip(a, 0, tripCooldown, tripTTL)
	e.disable(a)
	e.mustAcquire(a, "x", true)
	if st := e.read(b); st != zero {
		e.t.Fatalf("key %q after Trip, Disable, AcquireProbe on %q: %+v, want the zero State", b, a, st)
	}
	e.mustAcquire(b, "y", true)
	if _, ok := e.reopen(a, 1, reopenCooldown, reopenTTL); !ok {
		e.t.Fatal("Reopen(gen 1) refused")
	}
	if _, ok := e.close(a, 2); !ok {
		e.t.Fatal("Close(gen 2) refused")
	}
	e.release(a, "x")
	if st := e.read(b); st != zero {
		e.t.Fatalf("key %q after Reopen, Close on %q: %+v, want the zero State", b, a, st)
	}
	e.mustAcquire(b, "x", false) // y's lock on b outlived everything done to a
	e.checkRead("a after its cycle", a, closedAt(3).disabled())

	// b moves through its own generations, at seens a has long passed.
	e.mustTrip(b, 0, reopenCooldown, reopenTTL)
	e.checkRead("Trip(seen 0) on b", b, openAt(1, reopenCooldown, reopenTTL))
	e.checkRead("a after b tripped", a, closedAt(3).disabled())
	e.mustAcquire(a, "z", true)
	e.release(b, "y")
	e.mustAcquire(a, "x", false) // b's release left a's lock
	e.enable(b)
	e.checkRead("a after Enable on b", a, closedAt(3).disabled())
	e.enable(a)
	e.checkRead("b after Enable on a", b, openAt(1, reopenCooldown, reopenTTL))
	if _, ok := e.close(b, 1); !ok {
		e.t.Fatal("Close(gen 1) on b refused")
	}
	e.checkRead("a after b closed", a, closedAt(3))
	e.checkRead("b closed", b, closedAt(2))
}
