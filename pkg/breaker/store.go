package breaker

import (
	"context"
	"time"
)

// Store keeps the state that must agree across every instance sharing a
// backend: generations, open entries (with their cooldown TTL), probe locks
// and manual disables. Every state-changing method is a single atomic
// compare-and-set, so the rules in Breaker never depend on which instance
// acts first. A Store error means "no transition": the breaker logs it and
// never closes on an error.
//
// The generation counter of a key only ever goes up and is never deleted;
// Close deletes the open entry, not the counter. Disables are stored apart
// from breaker entries and no method except Enable clears them.
//
// A Redis implementation maps one-to-one: a counter key (INCR, no TTL), an
// open-entry hash {gen, cooldown} plus a cooldown key with PX TTL, the CAS
// methods as Lua scripts, the probe lock as SET NX PX with an owner token and
// release as a compare-owner-then-DEL script, and a disabled set.
type Store interface {
	// Read returns the current state of key. CooldownLeft is the remaining
	// TTL, never a timestamp.
	Read(ctx context.Context, key string) (State, error)

	// Trip opens the breaker if it is closed and its generation is still
	// seen: generation+1, an open entry with the nominal cooldown, and a
	// cooldown that runs out after ttl. It returns the state after the call
	// and whether this call made the transition.
	Trip(ctx context.Context, key string, seen uint64, cooldown, ttl time.Duration) (State, bool, error)

	// Close is the compare-and-delete of rule 3: if the breaker is open at
	// generation gen, delete the open entry and add one to the generation.
	Close(ctx context.Context, key string, gen uint64) (State, bool, error)

	// Reopen replaces the open entry of generation gen with one of
	// generation gen+1, nominal cooldown and a fresh ttl (rule 4).
	Reopen(ctx context.Context, key string, gen uint64, cooldown, ttl time.Duration) (State, bool, error)

	// AcquireProbe takes the probe lock of key for owner if no live lock
	// exists (SET NX PX). The lock expires after ttl so a crashed prober
	// cannot wedge the backend.
	AcquireProbe(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	// ReleaseProbe drops the lock only if owner still holds it.
	ReleaseProbe(ctx context.Context, key, owner string) error

	// Disable and Enable set and clear the manual disable; both idempotent.
	Disable(ctx context.Context, key string) error
	Enable(ctx context.Context, key string) error
}

// Notifier is what a Store shared by several instances offers so that a
// change made elsewhere reaches this instance at once rather than at its
// next snapshot refresh. Breaker.Run watches its key when its Store is one.
type Notifier interface {
	// Watch calls changed whenever key may have changed (it must not
	// block; it may be called spuriously), until the returned stop is
	// called.
	Watch(key string, changed func()) (stop func())
}
