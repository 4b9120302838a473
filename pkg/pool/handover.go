package pool

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// A binary upgrade hands established connections to the new process
// (pkg/flow): the old process's loops detach them, giving back their
// counts here, and the new process's loops adopt them, taking the counts
// up on their backend and resuming a breaker verdict still open with the
// generation its dial captured.

// Adopt counts a connection (or UDP session) handed over by another
// process on b, as an established one: above max_connections if need be,
// since it is open already and refusing it would cut it. It reports
// whether b's drain deadline has passed: the caller cuts it, as the drain
// would have (its deadline may fall between this process building its
// pools and adopting, when there was nothing here to cut).
func (p *Pool) Adopt(b *Backend) (cut bool) {
	b.active.Add(1)
	b.loadChanged()
	if b.Departed() {
		p.addLeaving(b) // once it counts, so Leaving keeps it
	}
	return b.current().drain.Load().pastDeadline(p.clock.Now())
}

// Detach gives back the count of a connection handed over to another
// process: its relay goes on there, not here.
func (p *Pool) Detach(b *Backend) { p.EndRelay(b) }

// Open reports the dial a still-open settlement judges: whether it was a
// force-try, and the breaker generation it captured before connect(2).
// ok is false for a nil or settled one (nothing to hand over).
func (s *Settlement) Open() (force bool, generation uint64, ok bool) {
	if s == nil || s.done.Load() {
		return false, 0, false
	}
	return s.d.kind == DialForce, s.d.attempt.Generation, true
}

// Resume is a settlement handed over by another process: the dial to b
// it captured generation for, its result still open. Settled here, it
// counts as that dial's result would have there: a success captured
// before a trip that came since is stale and closes nothing.
func (p *Pool) Resume(b *Backend, force bool, generation uint64) *Settlement {
	k, bk := DialClient, breaker.KindClient
	if force {
		k, bk = DialForce, breaker.KindForce
	}
	return &Settlement{d: Dial{Backend: b, kind: k, attempt: breaker.Attempt{Kind: bk, Generation: generation}}}
}

// ByIdentity finds a backend by its hashing identity (Backend.ID).
func (p *Pool) ByIdentity(id string) (*Backend, bool) {
	b := p.backend(id)
	return b, b != nil
}

// Departed stands for a backend no longer in the pool (a reload, the API
// or discovery removed it, or moved it to another address) in a
// connection or session an upgrade hands over that was made to it before
// it left: its drain or removal was still running in the old process.
// Refusing such a connection would reset it, in both processes (neither
// has the backend), where the old one had let it finish. The stand-in
// carries the connection's count and its address for the access log and
// nothing else: no checks, no breaker (a verdict still open has nothing
// to judge), never picked, never Usable, and no drain's deadline follows
// it here. addr must be the IP:port it was made to.
func (p *Pool) Departed(id, addr string) (*Backend, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("pool %s: departed backend %s: address %q: %w", p.Name, id, addr, err)
	}
	p.leavingMu.Lock()
	defer p.leavingMu.Unlock()
	key := id + " " + addr
	if b := p.departed[key]; b != nil {
		return b, nil // one stand-in for all its connections
	}
	b := &Backend{Addr: addr, AddrPort: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ID: id, counters: &counters{}}
	b.handedTo.Store(retired)
	if p.departed == nil {
		p.departed = map[string]*Backend{}
	}
	p.departed[key] = b
	return b, nil
}

// Departed reports whether b is a stand-in made by Pool.Departed (false
// for nil).
func (b *Backend) Departed() bool { return b != nil && b.pool == nil && b.handedTo.Load() == retired }

// addLeaving records b, which left the pool, if connections on it are
// still open (nil p: the reload removed the pool, and nothing shows it).
func (p *Pool) addLeaving(b *Backend) {
	if p == nil || b.Active() <= 0 {
		return
	}
	p.leavingMu.Lock()
	if !slices.Contains(p.leaving, b) {
		p.leaving = append(p.leaving, b)
	}
	p.leavingMu.Unlock()
}

// Leaving returns the backends that left the pool with connections still
// open on them, each with its Active count (those whose last connection
// ended are dropped here).
func (p *Pool) Leaving() []*Backend {
	p.leavingMu.Lock()
	defer p.leavingMu.Unlock()
	p.leaving = slices.DeleteFunc(p.leaving, func(b *Backend) bool { return b.Active() <= 0 })
	return slices.Clone(p.leaving)
}
