package pool

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/pick"
)

// Backup backends ([[pool.X.backend]] backup = true). A pool's backends
// form two sets, its primaries and its backups, each with a picker of its
// own: every algorithm works unchanged within a set, and a hashing key
// stays put within each (a backup's keys do not move when a primary
// leaves). New clients go to the primaries while any primary is in
// rotation, to the backups only while none is; the connections a set
// holds finish wherever they are when the other set takes over.
//
// In rotation is what the pool already calls it (Backend.InRotation):
// health up, breaker closed, not disabled, not draining; and weight above
// 0, since a weight-0 primary takes no new client either. A primary at its
// max_connections stays in rotation: the pool is Full, and the client
// queues for queue_timeout or is refused as backend_cap, as HAProxy's
// backups serve only when every primary is down and never as overflow. A
// backup that took clients whenever a primary filled up would serve on
// every peak, and which set serves would flap with every connection that
// opened or closed; capacity is the primaries' max_connections (or more
// primaries), failure is the backups'.
//
// Which set serves is read from a count per set of its members in
// rotation, kept at every change of a member's usability, drain or weight
// (rotationChanged), so a pick pays two atomic loads for it and never a
// scan of the pool.

// Serving is which of a pool's sets takes new clients.
type Serving uint8

const (
	ServingPrimary Serving = iota // a primary is in rotation
	ServingBackup                 // no primary is, a backup is
	ServingNone                   // none is: the pool is all down (rule 6)
)

var servingNames = [...]string{"primary", "backup", "none"}

// String is the name the pools JSON gives: "primary", "backup", "none".
func (s Serving) String() string { return servingNames[s] }

// set is one of a pool's two sets of backends, with the picker over them.
// Its picker sees the members by their position in members (a backend's
// slot); the pool's plans name backends by their index in the pool.
type set struct {
	p       *Pool
	members []int                       // pool indices, in configuration order
	pick    atomic.Pointer[pick.Picker] // nil while the set is empty
	// inRotation counts the members in rotation (Backend.rotating);
	// written under p.rotMu.
	inRotation atomic.Int32
	// poll is the next member re-read while the set has none in
	// rotation (pollOne).
	poll atomic.Uint32
}

// The pick.State of a set's picker, by slot.
func (s *set) Usable(k int) bool           { return s.p.Usable(s.members[k]) }
func (s *set) Active(k int) int64          { return s.p.backends[s.members[k]].active.Load() }
func (s *set) UsableSince(k int) time.Time { return s.p.UsableSince(s.members[k]) }

// buildSets splits the pool's backends into its primaries and backups and
// builds their pickers.
func (p *Pool) buildSets() error {
	p.primaries, p.backups = &set{p: p}, &set{p: p}
	for i, b := range p.backends {
		s := p.setOf(b)
		b.slot = len(s.members)
		s.members = append(s.members, i)
	}
	for _, s := range []*set{p.primaries, p.backups} {
		if err := s.rebuild(); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pool) setOf(b *Backend) *set {
	if b.backup {
		return p.backups
	}
	return p.primaries
}

// rebuild makes the set's picker from its members' weights now and
// publishes it; p.wmu must be held once the pool serves.
func (s *set) rebuild() error {
	if len(s.members) == 0 {
		return nil
	}
	bs := make([]pick.Backend, len(s.members))
	for k, i := range s.members {
		b := s.p.backends[i]
		bs[k] = pick.Backend{ID: b.ID, Weight: b.Weight()}
	}
	picker, err := pick.New(bs, s, s.p.pickCfg)
	if err != nil {
		return fmt.Errorf("pool %s: %w", s.p.Name, err)
	}
	s.publish(picker)
	return nil
}

// publish makes picker the set's and points every member's change notices
// at it (pick.Notified): with them its ordered structures stay exact at a
// cost that does not grow with the pool.
func (s *set) publish(picker pick.Picker) {
	s.pick.Store(&picker)
	n, ok := picker.(pick.Notified)
	if !ok {
		return
	}
	f := n.Changed
	for _, i := range s.members {
		s.p.backends[i].notify.Store(&f)
	}
	// What changed between building the picker and publishing it.
	for _, i := range s.members {
		f(s.p.backends[i].slot)
	}
}

// pickFor appends the set's pick for a client to dst, as pool indices
// (the pickers keep what they append distinct from one another only, so
// dst may hold another set's).
func (s *set) pickFor(src netip.AddrPort, n int, dst []int) []int {
	from := len(dst)
	dst = (*s.pick.Load()).Pick(src, n, dst)
	return s.toPool(dst, from)
}

// orderFor appends every member of weight > 0 in the client's preference
// order (pick.Picker.Order), as pool indices.
func (s *set) orderFor(src netip.AddrPort, dst []int) []int {
	if len(s.members) == 0 {
		return dst
	}
	from := len(dst)
	dst = (*s.pick.Load()).Order(src, dst)
	return s.toPool(dst, from)
}

func (s *set) toPool(dst []int, from int) []int {
	for k := from; k < len(dst); k++ {
		dst[k] = s.members[dst[k]]
	}
	return dst
}

// full reports whether the set refuses new clients only for want of a
// slot: some member is in rotation and every such one is at its
// max_connections.
func (s *set) full() bool {
	full := false
	for _, i := range s.members {
		b := s.p.backends[i]
		if !b.Usable() || b.Draining() || b.Weight() == 0 {
			continue // never picked for a new client: no slot to wait for
		}
		if !b.Full() {
			return false
		}
		full = true
	}
	return full
}

// pollEvery is how many plans of a pool whose set has no member in
// rotation make one re-read of a member (pollOne): a re-read of a backend
// the dial path does not otherwise touch costs a cache miss or two, and
// the notices make it a safety net only.
const pollEvery = 16

// pollOne re-reads one member's usability every pollEvery calls, round
// robin. A set with no member in rotation is never picked from, so nothing
// else re-reads its members on the dial path: should the notice of one
// coming back be missed, the count still finds it within
// pollEvery*len(members) plans.
func (s *set) pollOne() {
	n := s.poll.Add(1)
	if len(s.members) == 0 || n%pollEvery != 0 {
		return
	}
	k := int(n/pollEvery) % len(s.members)
	s.p.backends[s.members[k]].refreshUsable(s.p.clock.Now)
}

// serving is the set that takes new clients now: the primaries while one
// is in rotation, else the backups while one is, else nil (all down).
func (p *Pool) serving() *set {
	if p.primaries.inRotation.Load() > 0 {
		return p.primaries
	}
	p.primaries.pollOne()
	if p.backups.inRotation.Load() > 0 {
		return p.backups
	}
	p.backups.pollOne()
	return nil
}

// Serving reports which set takes new clients now (the pools JSON,
// l4lb_pool_serving_backups).
func (p *Pool) Serving() Serving {
	switch {
	case p.primaries.inRotation.Load() > 0:
		return ServingPrimary
	case p.backups.inRotation.Load() > 0:
		return ServingBackup
	}
	return ServingNone
}

// Backup reports whether b is a backup of its pool (backup = true).
func (b *Backend) Backup() bool { return b.backup }

// rotationChanged recounts b in its set after a change of its usability,
// drain or weight, and logs when the pool starts or stops serving from
// its backups. The inputs are written before the call and read under the
// lock, so the last call after any change counts what is true now.
func (b *Backend) rotationChanged() {
	p := b.pool
	if p == nil {
		return // the pool is still being built: New counts once it is
	}
	p.rotMu.Lock()
	defer p.rotMu.Unlock()
	in := b.usable.Load() && b.drain.Load() == nil && b.weight.Load() > 0
	if in == b.rotating {
		return
	}
	b.rotating = in
	d := int32(-1)
	if in {
		d = 1
	}
	p.setOf(b).inRotation.Add(d)
	p.logServing()
}

// countRotation counts every backend once the sets are built (New), and
// logs the set serving if it is not the one the pool replaced served.
func (p *Pool) countRotation(prev *Pool) {
	p.rotMu.Lock()
	defer p.rotMu.Unlock()
	p.logged = ServingPrimary // a fresh start serves its primaries
	if prev != nil {
		p.logged = prev.Serving()
	}
	for _, b := range p.backends {
		b.pool = p
		b.rotating = b.usable.Load() && b.drain.Load() == nil && b.weight.Load() > 0
		if b.rotating {
			p.setOf(b).inRotation.Add(1)
		}
	}
	p.logServing()
}

// logServing logs a change of the serving set to or from the backups;
// p.rotMu held. A pool without backups never logs here: its all-down
// state is the breaker's and the checks' to report, as before.
func (p *Pool) logServing() {
	now, was := p.Serving(), p.logged
	if now == was {
		return
	}
	p.logged = now
	primaries, backups := len(p.primaries.members), len(p.backups.members)
	switch {
	case now == ServingBackup:
		p.log.Warn("no primary backend is usable: new clients go to the backups",
			"primaries", primaries, "backups_usable", p.backups.inRotation.Load(), "was", was.String())
	case was == ServingBackup && now == ServingPrimary:
		p.log.Info("a primary backend is usable again: new clients go to the primaries, the backups' connections finish",
			"primaries_usable", p.primaries.inRotation.Load(), "backups", backups)
	case was == ServingBackup:
		p.log.Warn("no backup backend is usable either: the pool is all down", "primaries", primaries, "backups", backups)
	}
}
