package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/l4lb/l4lb/pkg/pick"
)

// Runtime control by an operator (the admin API): drains and weights. Both
// live in the pool's memory, are carried by a reload to the backend of the
// same identity, and this instance's own (scope local) are written to the
// state file (when one is set) by the Deps.OnRuntimeChange hook, as manual
// disables are kept by the Store. A fleet's (scope fleet) are kept in its
// store and applied here by ApplyFleet (shared.go).

// Drain is an operator's drain of one backend: no new connections from
// Since; at Deadline the connections still open are cut with a reset.
// A drained backend stays out of rotation until it is enabled.
type Drain struct {
	Since    time.Time
	Deadline time.Time
	// Scope is where the drain holds: ScopeLocal (this instance) or
	// ScopeFleet (every instance of a fleet, shared.go).
	Scope Scope
	// untimed: restored from a record that kept no times (an older
	// build's): its deadline is unknown, so it cuts nothing.
	untimed bool
}

// pastDeadline reports whether d's deadline is known and not after now:
// a connection adopted on its backend then is one it would have cut.
func (d *Drain) pastDeadline(now time.Time) bool {
	return d != nil && !d.untimed && !d.Deadline.After(now)
}

// ErrBadWeight is wrapped by SetWeight's error for a weight out of range.
var ErrBadWeight = errors.New("weight out of range")

// Draining reports whether an operator drains (or has drained) b.
func (b *Backend) Draining() bool { return b.current().drain.Load() != nil }

// DrainState returns b's drain, if any.
func (b *Backend) DrainState() (Drain, bool) {
	if d := b.current().drain.Load(); d != nil {
		return *d, true
	}
	return Drain{}, false
}

// Weight is b's weight now: the configured one, or the operator's.
func (b *Backend) Weight() int { return int(b.weight.Load()) }

// ConfiguredWeight is the weight the configuration file gives b.
func (b *Backend) ConfiguredWeight() int { return b.cfgWeight }

// current is the backend that carries b on after reloads (b itself when
// none does): a drain or weight set on it applies to connections made by
// the pools before.
func (b *Backend) current() *Backend {
	for {
		next := b.handedTo.Load()
		if next == nil || next == retired {
			return b
		}
		b = next
	}
}

// Is reports whether b is other, or a backend of an earlier configuration
// that other carries on: the connections b holds are other's.
func (b *Backend) Is(other *Backend) bool {
	for x := b; x != nil && x != retired; x = x.handedTo.Load() {
		if x == other {
			return true
		}
	}
	return false
}

// InRotation reports whether b takes new connections: usable and not
// drained. What operators see as "usable" (the API, l4lb_backend_up,
// systemd's STATUS): a drained backend is healthy but takes nobody new.
// A full one stays in rotation: it takes the next client once a slot
// frees.
func (b *Backend) InRotation() bool { return b.Usable() && !b.Draining() }

// Admits reports whether a new client may be sent to b: in rotation, a
// slot free.
func (b *Backend) Admits() bool { return b.InRotation() && !b.Full() }

// Drain stops new connections to b at once and cuts those still open
// after timeout (0: at once), with a reset, through Deps.CutBackend: this
// instance's own drain (ScopeLocal). One already running is replaced by
// this one; a fleet's drain, if any, holds on beside it (shared.go).
func (p *Pool) Drain(_ context.Context, b *Backend, timeout time.Duration) error {
	if timeout < 0 {
		return fmt.Errorf("drain timeout %v < 0", timeout)
	}
	now := p.clock.Now()
	d := &Drain{Since: now, Deadline: now.Add(timeout), Scope: ScopeLocal}
	b.rt.mu.Lock()
	b.rt.localDrain = d
	b.rt.mu.Unlock()
	b.drainsChanged()
	p.log.Info("backend draining", "backend", b.Addr, "timeout", timeout, "connections", b.Active(), "scope", ScopeLocal)
	p.scheduleCut(b, d)
	p.changed()
	return nil
}

// scheduleCut arms the drain's deadline. The timer holds no lock: at the
// deadline it cuts only if the drain is still the one it was armed for.
func (p *Pool) scheduleCut(b *Backend, d *Drain) {
	p.clock.AfterFunc(max(0, d.Deadline.Sub(p.clock.Now())), func() {
		if !b.current().holdsDrain(d) {
			return // enabled again, or drained anew
		}
		left := b.Active()
		if left > 0 && p.cut != nil {
			p.log.Info("drain deadline: resetting the connections still open", "backend", b.Addr, "connections", left)
			p.cut(b.current())
		}
	})
}

// EndLocalDrain ends this instance's own drain of b (ScopeLocal), and
// nothing else: a fleet's drain and a disable, which are every
// instance's, hold on (the admin API's enable?scope=local in a fleet).
func (p *Pool) EndLocalDrain(_ context.Context, b *Backend) error {
	b.rt.mu.Lock()
	had := b.rt.localDrain != nil
	b.rt.localDrain = nil
	b.rt.mu.Unlock()
	b.drainsChanged()
	p.log.Info("backend's own drain ended by operator", "backend", b.Addr, "had_one", had, "draining", b.Draining(), "scope", ScopeLocal)
	p.changed()
	b.refreshUsable(p.clock.Now)
	return nil
}

// undrain ends b's drains on this instance, its own and the fleet's
// (Enable; the fleet's record is the caller's to end, shared.go).
func (p *Pool) undrain(b *Backend) bool {
	b.rt.mu.Lock()
	b.rt.localDrain, b.rt.fleetDrain = nil, nil
	b.rt.mu.Unlock()
	return b.drainsChanged()
}

// CheckWeight refuses a weight out of range (ErrBadWeight).
func CheckWeight(w int) error {
	if w < 0 || w > pick.MaxWeight {
		return fmt.Errorf("%w: %d is not in 0..%d", ErrBadWeight, w, pick.MaxWeight)
	}
	return nil
}

// SetWeight gives b a new weight for new picks, at once: the picker is
// rebuilt (hashing pickers move only what the new weight asks for).
// Connections open stay where they are.
func (p *Pool) SetWeight(_ context.Context, b *Backend, w int) error {
	if err := CheckWeight(w); err != nil {
		return err
	}
	b.rt.mu.Lock()
	prev := b.rt.localWeight
	b.rt.localWeight = nil
	if w != b.cfgWeight { // the file's weight ends this instance's own
		b.rt.localWeight = &w
	}
	b.rt.mu.Unlock()
	old, err := p.weightsChanged(b)
	if err != nil {
		b.rt.mu.Lock()
		b.rt.localWeight = prev
		b.rt.mu.Unlock()
		return err
	}
	p.log.Info("backend weight set by operator", "backend", b.Addr, "weight", b.Weight(), "was", old, "scope", ScopeLocal)
	p.changed()
	return nil
}

// weightsChanged makes b's weight in use what its scopes add up to
// (effectiveWeight), rebuilding the picker when that changed; on an error
// the weight stays as it was.
func (p *Pool) weightsChanged(b *Backend) (old int, err error) {
	p.wmu.Lock()
	w := b.effectiveWeight()
	old = int(b.weight.Swap(int32(w)))
	if old != w {
		if err = p.setOf(b).rebuild(); err != nil {
			b.weight.Store(int32(old))
		}
	}
	p.wmu.Unlock()
	b.rotationChanged() // weight 0 is out of rotation
	return old, err
}

func (p *Pool) changed() {
	if p.onChange != nil {
		p.onChange()
	}
}

// carryRuntime takes a reload's predecessor's drain and weight: the
// operator's changes survive a reload. A weight the file changed since
// the operator set one is the file's (keepOperatorWeight).
func (p *Pool) carryRuntime(b, prev *Backend) {
	prev.rt.mu.Lock()
	rt := prev.rt.scopes
	prev.rt.mu.Unlock()
	b.rt.scopes = rt
	b.rt.localWeight = nil
	if rt.localWeight != nil {
		p.keepOperatorWeight(b, *rt.localWeight, prev.cfgWeight)
	}
	b.drain.Store(b.rt.effectiveDrain())
	b.weight.Store(int32(b.effectiveWeight()))
}

// restoreRuntime applies what the state file (or an upgrade) kept for b
// at start. A drain whose deadline is still ahead is armed for what is
// left of it.
func (p *Pool) restoreRuntime(b *Backend, rt Runtime) {
	if rt.Drained {
		now := p.clock.Now()
		d := &Drain{Since: now, Deadline: now, Scope: ScopeLocal, untimed: true}
		if !rt.DrainSince.IsZero() && !rt.DrainDeadline.IsZero() {
			d.Since, d.Deadline, d.untimed = rt.DrainSince, rt.DrainDeadline, false
		}
		b.rt.localDrain = d
		if d.Deadline.After(now) {
			defer p.scheduleCut(b, d)
		}
	}
	if rt.Weight != nil && *rt.Weight >= 0 && *rt.Weight <= pick.MaxWeight {
		p.keepOperatorWeight(b, *rt.Weight, rt.ConfiguredWeight)
	}
	b.drain.Store(b.rt.effectiveDrain())
	b.weight.Store(int32(b.effectiveWeight()))
}

// keepOperatorWeight gives b the weight w an operator set while the file
// said fileWeight, unless the file now says something else: an edit of
// the file is the newer word. That replacement is logged, since the
// operator's weight goes without any action of theirs.
func (p *Pool) keepOperatorWeight(b *Backend, w, fileWeight int) {
	if fileWeight == b.cfgWeight {
		if w != b.cfgWeight {
			b.rt.localWeight = &w
		}
		return
	}
	p.log.Warn("the file's new weight replaces the operator's", "backend", b.Addr,
		"operator_weight", w, "file_weight_was", fileWeight, "file_weight", b.cfgWeight)
}

// RuntimeStates reports, by backend identity, what an operator changed at
// run time on this instance alone (for the state file and an upgrade's
// hand-over: a fleet's drains and weights are in its store); backends with
// nothing changed are left out.
func (p *Pool) RuntimeStates() map[string]Runtime {
	m := map[string]Runtime{}
	for _, b := range p.backends {
		var rt Runtime
		b.rt.mu.Lock()
		if w := b.rt.localWeight; w != nil {
			v := *w
			rt.Weight, rt.ConfiguredWeight = &v, b.cfgWeight
		}
		if d := b.rt.localDrain; d != nil {
			rt.Drained = true
			// Its times only while its deadline is ahead (what a new
			// process must still cut at): a record with them needs the
			// upgrade document's version 4, which the build before
			// refuses whole, so a rollback keeps more without them.
			if d.Deadline.After(p.clock.Now()) && !d.untimed {
				rt.DrainSince, rt.DrainDeadline = d.Since, d.Deadline
			}
			// Shown in the state file; read only with a weight.
			rt.ConfiguredWeight = b.cfgWeight
		}
		b.rt.mu.Unlock()
		if rt.Weight != nil || rt.Drained {
			m[b.ID] = rt
		}
	}
	return m
}
