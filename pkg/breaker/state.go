package breaker

import "time"

// State is one backend's breaker state as the Store holds it, and as the
// Breaker reports it from its local snapshot.
type State struct {
	// Generation only goes up; every transition adds one. 0: never tripped.
	Generation uint64
	// Open is true while the breaker is tripped.
	Open bool
	// Cooldown is the nominal (un-jittered) cooldown of the current open
	// entry; a failed probe doubles it. 0 when closed.
	Cooldown time.Duration
	// CooldownLeft is the time until recovery probing may start (the TTL in
	// Redis). 0 when closed or run out.
	CooldownLeft time.Duration
	// Disabled is the manual (admin) disable, kept apart from the breaker.
	Disabled bool
	// LocalOnly is true while the breaker is open on this instance alone:
	// it tripped below the fleet's trip quorum (quorum.go), so its own
	// dials stay off the backend and the other instances' do not. Open is
	// true with it; Cooldown and CooldownLeft are then this instance's
	// own, and Generation is still the Store's. Only Breaker.State sets
	// it: a Store never does.
	LocalOnly bool
}
