package storetest

// testDisableApart: the manual disable is kept apart from breaker entries.
// Transitions leave it (and report it in the state they return), Close never
// clears it, Enable clears only it, and both are idempotent.
func testDisableApart(e *env) {
	k := e.key("k")
	e.disable(k)
	e.disable(k) // idempotent
	e.checkRead("Disable twice", k, closedAt(0).disabled())

	st, ok := e.trip(k, 0, tripCooldown, tripTTL)
	e.checkOK("Trip(seen 0) when disabled", ok, true)
	e.check("Trip(seen 0) when disabled", st, openAt(1, tripCooldown, tripTTL).disabled())
	st, ok = e.trip(k, 0, tripCooldown, tripTTL)
	e.checkOK("refused Trip(seen 0) when disabled", ok, false)
	e.check("refused Trip(seen 0) when disabled", st, openAt(1, tripCooldown, tripTTL).disabled())
	st, ok = e.reopen(k, 1, reopenCooldown, reopenTTL)
	e.checkOK("Reopen(gen 1) when disabled", ok, true)
	e.check("Reopen(gen 1) when disabled", st, openAt(2, reopenCooldown, reopenTTL).disabled())
	st, ok = e.close(k, 2)
	e.checkOK("Close(gen 2) when disabled", ok, true)
	e.check("Close(gen 2) when disabled", st, closedAt(3).disabled())
	st, ok = e.close(k, 2)
	e.checkOK("refused Close(gen 2) when disabled", ok, false)
	e.check("refused Close(gen 2) when disabled", st, closedAt(3).disabled())
	e.checkRead("trip, reopen, close when disabled", k, closedAt(3).disabled())

	e.enable(k)
	e.checkRead("Enable", k, closedAt(3))
	e.enable(k) // idempotent
	e.checkRead("Enable twice", k, closedAt(3))

	// Enable clears only the disable: an open entry stays as it is, and so
	// does the state of an enable that finds nothing to clear.
	if _, ok := e.trip(k, 3, tripCooldown, tripTTL); !ok {
		e.t.Fatal("Trip(seen 3) refused")
	}
	e.disable(k)
	e.checkRead("Disable when open", k, openAt(4, tripCooldown, tripTTL).disabled())
	e.enable(k)
	e.checkRead("Enable when open", k, openAt(4, tripCooldown, tripTTL))
	e.enable(k)
	e.checkRead("Enable when open and not disabled", k, openAt(4, tripCooldown, tripTTL))
}

// testDisableNeverTripped: a disable needs no breaker entry. A key only ever
// disabled reads Disabled at generation 0, and an enable of a key never
// disabled is no error and sets nothing.
func testDisableNeverTripped(e *env) {
	k := e.key("k")
	e.disable(k)
	e.checkRead("Disable of a never-tripped key", k, closedAt(0).disabled())
	e.enable(k)
	e.checkRead("Enable of it", k, closedAt(0))

	never := e.key("never")
	e.enable(never)
	e.checkRead("Enable of a key never disabled", never, closedAt(0))
}
