package pool

import (
	"sync"
	"time"
)

// A backend's drains and weights by scope. An operator's drain or weight
// is this instance's own (ScopeLocal: Drain, SetWeight, as without a
// fleet) or the fleet's (ScopeFleet: a record in the fleet's store, which
// every instance applies through ApplyFleet). The two add up:
//
//   - drained while either drain holds; each resets what is still open at
//     its own deadline. Enable ends both here (and the caller ends the
//     fleet's record); a fleet's undrain ends only the fleet's, so a drain
//     made here with scope local stays until it is enabled here.
//   - the weight in use is this instance's own if it has one, else the
//     fleet's while this file's weight is still the one the fleet's
//     replaced (a file edited since is the newer word, as at a restart),
//     else the file's.

// Scope is where an operator's drain or weight holds.
type Scope string

const (
	ScopeLocal Scope = "local"
	ScopeFleet Scope = "fleet"
)

// scoped is a backend's drains and weights by scope, under mu.
type scoped struct {
	mu sync.Mutex
	scopes
}

type scopes struct {
	localDrain, fleetDrain *Drain
	localWeight            *int
	// fleetWeight applies while the file's weight is fleetConfigured.
	fleetWeight     *int
	fleetConfigured int
	// The versions of the fleet's records applied: an older record read
	// late (a reconnect's re-read racing a newer change) changes nothing.
	drainVersion, weightVersion uint64
}

// effectiveDrain is the drain the data path sees: this instance's own, or
// else the fleet's; rt.mu held (or b not yet shared).
func (rt *scopes) effectiveDrain() *Drain {
	if rt.localDrain != nil {
		return rt.localDrain
	}
	return rt.fleetDrain
}

// effectiveWeight is the weight in use by the rule above; b.rt.mu must not
// be held.
func (b *Backend) effectiveWeight() int {
	b.rt.mu.Lock()
	defer b.rt.mu.Unlock()
	switch {
	case b.rt.localWeight != nil:
		return *b.rt.localWeight
	case b.rt.fleetWeight != nil && b.rt.fleetConfigured == b.cfgWeight:
		return *b.rt.fleetWeight
	}
	return b.cfgWeight
}

// WeightScope is where the weight in use comes from: ScopeLocal,
// ScopeFleet, or "" for the file's.
func (b *Backend) WeightScope() Scope {
	b = b.current()
	b.rt.mu.Lock()
	defer b.rt.mu.Unlock()
	switch {
	case b.rt.localWeight != nil:
		return ScopeLocal
	case b.rt.fleetWeight != nil && b.rt.fleetConfigured == b.cfgWeight:
		return ScopeFleet
	}
	return ""
}

// holdsDrain reports whether d is one of b's drains still.
func (b *Backend) holdsDrain(d *Drain) bool {
	b.rt.mu.Lock()
	defer b.rt.mu.Unlock()
	return b.rt.localDrain == d || b.rt.fleetDrain == d
}

// drainsChanged publishes b's effective drain; it reports whether b was
// draining before.
func (b *Backend) drainsChanged() (was bool) {
	b.rt.mu.Lock() // published under the lock: two changes publish in order
	was = b.drain.Swap(b.rt.effectiveDrain()) != nil
	b.rt.mu.Unlock()
	b.loadChanged() // in or out of the picker's structures at once
	b.rotationChanged()
	return was
}

// Fleet is a fleet's records of one backend's drain and weight, as the
// fleet's store answers them; a nil part is not told.
type Fleet struct {
	Drain  *FleetDrain
	Weight *FleetWeight
	// Here: the operator made the change through this instance. It then
	// replaces this instance's own drain or weight too (the operator
	// asked for the fleet's, here as everywhere), and it applies at the
	// version last applied as well (a drain kept while the store is out
	// of reach has no newer one yet).
	Here bool
}

// FleetDrain is the fleet's drain record: drained or not, and for a drain
// the timeout asked for and the time left to its deadline when read.
type FleetDrain struct {
	Version uint64
	Drained bool
	Timeout time.Duration
	Left    time.Duration
}

// FleetWeight is the fleet's weight record: Weight nil is a reset (each
// instance its file's); else Weight replaced the file's Configured.
type FleetWeight struct {
	Version    uint64
	Weight     *int
	Configured int
}

// ApplyFleet takes the fleet's records of b where they are newer than
// those applied (or made here): a drain from now, reset at its deadline
// as a local one is, an undrain, a weight or its reset. It is logged,
// and the picker rebuilt when the weight in use changes.
func (p *Pool) ApplyFleet(b *Backend, f Fleet) error {
	newer := func(v, applied uint64) bool { return v > applied || (f.Here && v >= applied) }
	changed := false
	defer func() {
		if changed {
			p.changed()
		}
	}()
	if d := f.Drain; d != nil {
		b.rt.mu.Lock()
		apply := newer(d.Version, b.rt.drainVersion)
		var nd *Drain
		if apply {
			b.rt.drainVersion = max(d.Version, b.rt.drainVersion)
			if d.Drained {
				now := p.clock.Now()
				nd = &Drain{Since: now, Deadline: now.Add(max(0, d.Left)), Scope: ScopeFleet}
			}
			b.rt.fleetDrain = nd
			if f.Here {
				b.rt.localDrain = nil
			}
		}
		b.rt.mu.Unlock()
		if apply {
			changed = true
			b.drainsChanged()
			if nd != nil {
				p.log.Info("backend draining", "backend", b.Addr, "timeout", d.Timeout, "left", max(0, d.Left),
					"connections", b.Active(), "scope", ScopeFleet)
				p.scheduleCut(b, nd)
			} else {
				p.log.Info("backend undrained by the fleet", "backend", b.Addr, "draining", b.Draining())
			}
		}
	}
	if w := f.Weight; w != nil {
		b.rt.mu.Lock()
		apply := newer(w.Version, b.rt.weightVersion)
		prevLocal, prevFleet, prevConf, prevVer := b.rt.localWeight, b.rt.fleetWeight, b.rt.fleetConfigured, b.rt.weightVersion
		if apply {
			b.rt.weightVersion = max(w.Version, b.rt.weightVersion)
			b.rt.fleetWeight, b.rt.fleetConfigured = w.Weight, w.Configured
			if f.Here {
				b.rt.localWeight = nil
			}
		}
		b.rt.mu.Unlock()
		if apply {
			old, err := p.weightsChanged(b)
			if err != nil {
				b.rt.mu.Lock()
				b.rt.localWeight, b.rt.fleetWeight, b.rt.fleetConfigured, b.rt.weightVersion = prevLocal, prevFleet, prevConf, prevVer
				b.rt.mu.Unlock()
				return err
			}
			changed = true
			switch {
			case w.Weight != nil && w.Configured != b.cfgWeight:
				p.log.Warn("the fleet's weight is not applied: this file's weight is not the one it replaced", "backend", b.Addr,
					"fleet_weight", *w.Weight, "file_weight_was", w.Configured, "file_weight", b.cfgWeight)
			default:
				p.log.Info("backend weight set by the fleet", "backend", b.Addr, "weight", b.Weight(), "was", old, "scope", b.WeightScope())
			}
		}
	}
	return nil
}
