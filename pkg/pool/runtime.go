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
// same identity, and are written to the state file (when one is set) by
// the Deps.OnRuntimeChange hook, as manual disables are kept by the Store.

// Drain is an operator's drain of one backend: no new connections from
// Since; at Deadline the connections still open are cut with a reset.
// A drained backend stays out of rotation until it is enabled.
type Drain struct {
	Since    time.Time
	Deadline time.Time
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
// after timeout (0: at once), with a reset, through Deps.CutBackend. A
// drain already running is replaced by this one.
func (p *Pool) Drain(_ context.Context, b *Backend, timeout time.Duration) error {
	if timeout < 0 {
		return fmt.Errorf("drain timeout %v < 0", timeout)
	}
	now := p.clock.Now()
	d := &Drain{Since: now, Deadline: now.Add(timeout)}
	b.drain.Store(d)
	b.loadChanged() // out of the picker's structures at once
	b.rotationChanged()
	p.log.Info("backend draining", "backend", b.Addr, "timeout", timeout, "connections", b.Active())
	p.scheduleCut(b, d)
	p.changed()
	return nil
}

// scheduleCut arms the drain's deadline. The timer holds no lock: at the
// deadline it cuts only if the drain is still the one it was armed for.
func (p *Pool) scheduleCut(b *Backend, d *Drain) {
	p.clock.AfterFunc(max(0, d.Deadline.Sub(p.clock.Now())), func() {
		if b.current().drain.Load() != d {
			return // enabled again, or drained anew
		}
		left := b.Active()
		if left > 0 && p.cut != nil {
			p.log.Info("drain deadline: resetting the connections still open", "backend", b.Addr, "connections", left)
			p.cut(b.current())
		}
	})
}

// undrain ends a drain (Enable).
func (p *Pool) undrain(b *Backend) bool {
	was := b.drain.Swap(nil) != nil
	if was {
		b.loadChanged()
		b.rotationChanged()
	}
	return was
}

// SetWeight gives b a new weight for new picks, at once: the picker is
// rebuilt (hashing pickers move only what the new weight asks for).
// Connections open stay where they are.
func (p *Pool) SetWeight(_ context.Context, b *Backend, w int) error {
	if w < 0 || w > pick.MaxWeight {
		return fmt.Errorf("%w: %d is not in 0..%d", ErrBadWeight, w, pick.MaxWeight)
	}
	p.wmu.Lock()
	old := b.weight.Swap(int32(w))
	err := p.setOf(b).rebuild()
	if err != nil {
		b.weight.Store(old)
	}
	p.wmu.Unlock()
	b.rotationChanged() // weight 0 is out of rotation
	if err != nil {
		return err
	}
	p.log.Info("backend weight set by operator", "backend", b.Addr, "weight", w, "was", old)
	p.changed()
	return nil
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
	if d := prev.drain.Load(); d != nil {
		b.drain.Store(d)
	}
	if w := prev.Weight(); w != prev.cfgWeight {
		p.keepOperatorWeight(b, w, prev.cfgWeight)
	}
}

// restoreRuntime applies what the state file (or an upgrade) kept for b
// at start.
func (p *Pool) restoreRuntime(b *Backend, rt Runtime) {
	if rt.Drained {
		now := p.clock.Now()
		b.drain.Store(&Drain{Since: now, Deadline: now})
	}
	if rt.Weight != nil && *rt.Weight >= 0 && *rt.Weight <= pick.MaxWeight {
		p.keepOperatorWeight(b, *rt.Weight, rt.ConfiguredWeight)
	}
}

// keepOperatorWeight gives b the weight w an operator set while the file
// said fileWeight, unless the file now says something else: an edit of
// the file is the newer word. That replacement is logged, since the
// operator's weight goes without any action of theirs.
func (p *Pool) keepOperatorWeight(b *Backend, w, fileWeight int) {
	if fileWeight == b.cfgWeight {
		b.weight.Store(int32(w))
		return
	}
	p.log.Warn("the file's new weight replaces the operator's", "backend", b.Addr,
		"operator_weight", w, "file_weight_was", fileWeight, "file_weight", b.cfgWeight)
}

// RuntimeStates reports, by backend identity, what an operator changed at
// run time (for the state file); backends with nothing changed are left
// out.
func (p *Pool) RuntimeStates() map[string]Runtime {
	m := map[string]Runtime{}
	for _, b := range p.backends {
		var rt Runtime
		if w := b.Weight(); w != b.cfgWeight {
			rt.Weight, rt.ConfiguredWeight = &w, b.cfgWeight
		}
		rt.Drained = b.drain.Load() != nil
		if rt.Weight != nil || rt.Drained {
			m[b.ID] = rt
		}
	}
	return m
}
