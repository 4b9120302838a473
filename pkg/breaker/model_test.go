package breaker

import (
	"time"
)

// model is a small reference model of docs/breaker.md's rules, written
// from the rules and the outcome table rather than from the code, for
// FuzzBreakerModel. It keeps what the Store keeps (generation, open entry
// with its cooldown deadline, probe lock, disable) and, per instance, what
// the rules say an instance keeps locally: its snapshot of the Store, its
// failure window, its count of recovery successes, and Run's two flags (a
// pending ProbeNow request, a probe running).
//
// Every step is deterministic: the harness advances the model and the real
// Breakers in lock step and compares them after every operation.
type model struct {
	cfg     Config
	lockTTL time.Duration
	now     func() time.Time // the Store's clock
	// quorum is the fleet's trip quorum (quorum.go): how many instances'
	// trips within Window open the breaker in the Store. 1: every trip.
	quorum int

	store modelStore
	inst  []modelInst

	events []fuzzEvent // what the rules say the hooks must have seen
	reads  uint64      // Store reads (and CAS calls) so far, in order
}

type modelStore struct {
	gen      uint64
	open     bool
	cooldown time.Duration // nominal cooldown of the open entry
	until    time.Time     // when the open entry's cooldown runs out
	disabled bool

	lockOwner int // index of the instance holding the probe lock; -1: none
	lockUntil time.Time

	// votes are the instances' trips below the quorum, by instance: the
	// Store's time of the vote and the generation it was cast at. A vote
	// counts while it is of the current generation and younger than
	// Window on the Store's clock.
	votes map[int]modelVote
}

type modelVote struct {
	at  time.Time
	gen uint64
}

// modelLocal is an open of one instance alone, below the quorum.
type modelLocal struct {
	gen      uint64        // the local generation it opened at
	cooldown time.Duration // nominal
	until    time.Time     // local time its probe is due
}

type modelInst struct {
	skew   time.Duration // this instance's local clock minus the Store's
	jitter float64       // what Options.Rand returns

	view   State     // the local snapshot
	readAt time.Time // local time it was installed
	ticket uint64    // which read it came from (model.reads)

	// Rule 1's window: failures of one closed generation seen here.
	winGen uint64
	fails  []time.Time // local times of the last cfg.Failures failures
	dials  []modelDial // every recorded dial (only with MinRatio > 0)
	origin time.Time   // local time the instance was built: bucket 0 starts here

	// Rule 3: successes of one open generation (and local generation)
	// seen here.
	recGen, recLocal uint64
	recN             int

	// The trip quorum: this instance's open below it, nil while none, and
	// its local generation, which every local transition raises.
	local    *modelLocal
	localGen uint64

	probeNow uint64 // generation+1 ProbeNow asked at and not yet answered (Run's request); 0: none
	probing  bool   // a probe runs in this instance (Run's flag)
}

type modelDial struct {
	at     time.Time
	failed bool
}

// fuzzEvent is one hook call (real) or one hook call the rules require
// (model).
type fuzzEvent struct {
	name  string // dial, trip, close, reopen, probe_failure, stale
	inst  int
	kind  Kind   // dial only
	res   Result // dial only
	st    State  // trip, close, reopen only
	local bool   // trip, close, reopen: of the instance's open alone, the Store untouched
}

func newModel(cfg Config, lockTTL time.Duration, quorum int, now func() time.Time, skews []time.Duration, jitters []float64) *model {
	m := &model{cfg: cfg.withDefaults(), lockTTL: lockTTL, quorum: quorum, now: now, store: modelStore{lockOwner: -1, votes: map[int]modelVote{}}}
	for i := range skews {
		in := modelInst{skew: skews[i], jitter: jitters[i]}
		in.origin = m.local(&in)
		m.inst = append(m.inst, in)
	}
	for i := range m.inst {
		m.publish(i) // New reads the Store
	}
	return m
}

func (m *model) local(in *modelInst) time.Time { return m.now().Add(in.skew) }

// storeState is what Store.Read must return now.
func (m *model) storeState() State {
	s := m.store
	st := State{Generation: s.gen, Disabled: s.disabled}
	if s.open {
		st.Open = true
		st.Cooldown = s.cooldown
		st.CooldownLeft = max(0, s.until.Sub(m.now()))
	}
	return st
}

// modelRead is one Store read (or the state a CAS returned): what it saw,
// and its place in the order of reads.
type modelRead struct {
	st     State
	ticket uint64
}

func (m *model) read() modelRead {
	m.reads++
	return modelRead{st: m.storeState(), ticket: m.reads}
}

// install is rule 8 for a read that returns now: the snapshot never goes
// back to an older generation, nor to an older read of the same generation
// (a read that began before a Disable must not undo it in the snapshot:
// rule 5).
func (m *model) install(i int, r modelRead) {
	in := &m.inst[i]
	if in.view.Generation > r.st.Generation || (in.view.Generation == r.st.Generation && in.ticket > r.ticket) {
		return
	}
	in.view, in.readAt, in.ticket = r.st, m.local(in), r.ticket
	if r.st.Open {
		in.local = nil // the fleet's open: this instance's own joins it
	}
}

// publish installs a read that returns at once.
func (m *model) publish(i int) { m.install(i, m.read()) }

// state is Breaker.State: the snapshot with the cooldown aged locally.
func (m *model) state(i int) State {
	in := &m.inst[i]
	st := in.view
	st.CooldownLeft = max(0, st.CooldownLeft-m.local(in).Sub(in.readAt))
	if lo := in.local; lo != nil && !st.Open {
		st.Open, st.LocalOnly = true, true
		st.Cooldown, st.CooldownLeft = lo.cooldown, max(0, lo.until.Sub(m.local(in)))
	}
	return st
}

// allows is Breaker.Allow.
func (m *model) allows(i int) bool {
	in := &m.inst[i]
	return !in.view.Open && !in.view.Disabled && in.local == nil
}

func (m *model) emit(e fuzzEvent) { m.events = append(m.events, e) }

func (m *model) setDisabled(i int, on bool) {
	m.store.disabled = on
	m.publish(i)
}

// done is the outcome table for one result arriving at instance i.
func (m *model) done(i int, a Attempt, r Result) {
	m.emit(fuzzEvent{name: "dial", inst: i, kind: a.Kind, res: r})
	if r == Local {
		return // local trouble: neither
	}
	in := &m.inst[i]
	if a.Generation > in.view.Generation {
		m.publish(i) // a result from a fresher view: catch up first
	}
	g := in.view.Generation
	switch {
	case a.Generation < g || a.LocalGeneration != in.localGen: // any state, stale: ignored, counted
		m.emit(fuzzEvent{name: "stale", inst: i})
	case !in.view.Open && in.local != nil:
		m.localResult(i, a, r)
	case !in.view.Open && a.Kind == KindForce:
		// closed, force (health-down only): counted only
	case !in.view.Open:
		m.closedResult(i, a, r)
	case a.Kind == KindClient:
		// open, client of the open generation: raced the trip, ignored
	case r == Success:
		m.recoverySuccess(i, a)
	case a.Kind == KindProbe:
		m.failedProbe(i, a)
	default:
		// open, failed force-try: counted only
	}
}

// closedResult is rule 1. The table has no row for a probe-kind attempt of
// a closed generation (the probe path only dials open generations); the
// breaker treats it as a client dial and so does the model.
func (m *model) closedResult(i int, a Attempt, r Result) {
	ratio := m.cfg.MinRatio > 0
	if r == Success && !ratio {
		return // nothing kept: a success never clears the window
	}
	in := &m.inst[i]
	now := m.local(in)
	if in.winGen != a.Generation { // each generation starts empty
		in.winGen, in.fails, in.dials = a.Generation, nil, nil
	}
	if r == Failure {
		in.fails = append(in.fails, now)
		if len(in.fails) > m.cfg.Failures {
			in.fails = in.fails[1:]
		}
	}
	if ratio {
		in.dials = append(in.dials, modelDial{at: now, failed: r == Failure})
	}
	if r != Failure || !m.windowTrips(in, now) {
		return
	}
	switch m.storeTrip(i, a.Generation) {
	case tripped:
		m.emit(fuzzEvent{name: "trip", inst: i, st: m.storeState()})
	case voted:
		m.openLocal(i, a)
	}
}

type tripOutcome int

const (
	refused tripOutcome = iota // open already, or the generation moved
	tripped                    // opened in the Store
	voted                      // recorded below the quorum
)

// storeTrip is the Store's half of a trip by instance i of generation
// seen: a compare-and-set (closed, still at seen), and with a quorum,
// i's vote first: the Store opens once quorum instances' votes of this
// generation lie within Window on its clock, and spends them. Instance i
// then learns the Store's state. The caller reports the trip.
func (m *model) storeTrip(i int, seen uint64) tripOutcome {
	s := &m.store
	if s.open || s.gen != seen {
		m.publish(i) // lost the race: learn the Store's state, no transition
		return refused
	}
	if m.quorum > 1 {
		s.votes[i] = modelVote{at: m.now(), gen: s.gen}
		live := 0
		for _, v := range s.votes {
			if v.gen == s.gen && m.now().Sub(v.at) < m.cfg.Window {
				live++
			}
		}
		if live < m.quorum {
			m.publish(i)
			return voted
		}
		clear(s.votes)
	}
	s.gen++
	s.open, s.cooldown, s.until = true, m.cfg.Cooldown, m.now().Add(m.cfg.Cooldown)
	m.publish(i)
	return tripped
}

// openLocal opens instance i's breaker alone: its trip of a was a vote
// below the quorum.
func (m *model) openLocal(i int, a Attempt) {
	in := &m.inst[i]
	if in.local != nil || a.LocalGeneration != in.localGen || in.view.Open || in.view.Generation != a.Generation {
		return
	}
	in.localGen++
	in.local = &modelLocal{gen: in.localGen, cooldown: m.cfg.Cooldown, until: m.local(in).Add(m.cfg.Cooldown)}
	in.fails, in.dials = nil, nil // the window starts empty
	m.emit(fuzzEvent{name: "trip", inst: i, st: m.state(i), local: true})
}

// localResult is the open rows of the outcome table for instance i's open
// alone, at its local generation.
func (m *model) localResult(i int, a Attempt, r Result) {
	switch {
	case a.Kind == KindClient:
		// raced the local trip: ignored
	case r == Success:
		m.recoverySuccess(i, a)
	case a.Kind == KindProbe:
		m.failedLocalProbe(i)
	default:
		// failed force-try: counted only
	}
}

// failedLocalProbe is rule 4 for an open alone: the alert, a new vote at
// the generation the instance sees (which may make the quorum: then the
// fleet opens, and this instance joins it), else a re-open alone with the
// doubled cooldown.
func (m *model) failedLocalProbe(i int) {
	in := &m.inst[i]
	lo := in.local
	next := min(max(2*lo.cooldown, m.cfg.Cooldown), m.cfg.MaxCooldown)
	ttl := min(time.Duration(float64(next)*(0.9+0.2*in.jitter)), m.cfg.MaxCooldown)
	out := m.storeTrip(i, in.view.Generation)
	m.emit(fuzzEvent{name: "probe_failure", inst: i})
	if out == tripped {
		m.emit(fuzzEvent{name: "trip", inst: i, st: m.storeState()})
		return
	}
	if in.local != lo {
		return // joined the fleet's open
	}
	in.localGen++
	in.local = &modelLocal{gen: in.localGen, cooldown: next, until: m.local(in).Add(ttl)}
	m.emit(fuzzEvent{name: "reopen", inst: i, st: m.state(i), local: true})
}

// windowTrips: the Failures-th most recent failure lies within Window, and
// (optionally) failures make up MinRatio of at least MinVolume dials over
// the last 64 buckets of Window/64.
func (m *model) windowTrips(in *modelInst, now time.Time) bool {
	f := m.cfg.Failures
	if len(in.fails) < f || now.Sub(in.fails[len(in.fails)-f]) >= m.cfg.Window {
		return false
	}
	if m.cfg.MinRatio <= 0 {
		return true
	}
	span := max(m.cfg.Window/ratioBuckets, 1)
	slot := func(t time.Time) int64 { return int64(t.Sub(in.origin) / span) }
	cur := slot(now)
	failures, total := 0, 0
	kept := in.dials[:0]
	for _, d := range in.dials {
		if s := slot(d.at); s > cur-ratioBuckets && s <= cur {
			kept = append(kept, d)
			total++
			if d.failed {
				failures++
			}
		}
	}
	in.dials = kept
	return total >= m.cfg.MinVolume && total > 0 && float64(failures) >= m.cfg.MinRatio*float64(total)
}

// recoverySuccess is rule 3: a success of the open generation counts here;
// at Successes the close is a compare-and-delete against the Store.
func (m *model) recoverySuccess(i int, a Attempt) {
	in := &m.inst[i]
	if in.recGen != a.Generation || in.recLocal != a.LocalGeneration {
		in.recGen, in.recLocal, in.recN = a.Generation, a.LocalGeneration, 0
	}
	in.recN++
	if in.recN < m.cfg.Successes {
		return
	}
	if in.local != nil && !in.view.Open {
		// The close of an open alone: the vote withdrawn, the local
		// generation raised, the window empty; the Store untouched.
		delete(m.store.votes, i)
		in.localGen++
		in.local = nil
		in.fails, in.dials = nil, nil
		m.emit(fuzzEvent{name: "close", inst: i, st: m.state(i), local: true})
		return
	}
	if s := &m.store; s.open && s.gen == a.Generation {
		s.gen++
		s.open, s.cooldown, s.until = false, 0, time.Time{}
		m.publish(i)
		m.emit(fuzzEvent{name: "close", inst: i, st: m.storeState()})
		return
	}
	m.publish(i)
	m.emit(fuzzEvent{name: "stale", inst: i}) // lost the race
}

// failedProbe is rule 4: re-open with min(max(2 x previous, cooldown),
// max_cooldown), the time to the next probe jittered by [0.9, 1.1] and
// capped, and the alert.
func (m *model) failedProbe(i int, a Attempt) {
	in := &m.inst[i]
	next := min(max(2*in.view.Cooldown, m.cfg.Cooldown), m.cfg.MaxCooldown)
	ttl := min(time.Duration(float64(next)*(0.9+0.2*in.jitter)), m.cfg.MaxCooldown)
	if s := &m.store; s.open && s.gen == a.Generation {
		s.gen++
		s.cooldown, s.until = next, m.now().Add(ttl)
		m.publish(i)
		m.emit(fuzzEvent{name: "reopen", inst: i, st: m.storeState()})
		m.emit(fuzzEvent{name: "probe_failure", inst: i})
		return
	}
	m.publish(i)
	m.emit(fuzzEvent{name: "stale", inst: i})
}

// probePlan is what one of Run's wake-ups at instance i must do.
type probePlan struct {
	started bool   // Run started its probe (probing set)
	local   bool   // the probe of an open alone: no lock
	locked  bool   // the probe took the Store's lock
	dial    bool   // and dials: open, enabled, cooldown out or early
	early   bool   // the probe was asked for (ProbeNow)
	askedAt uint64 // the generation it was asked for
	gen     uint64 // the generation the dial captures
	lgen    uint64 // and the local generation
}

// wake is one of Run's wake-ups: refresh, then start the probe if open,
// enabled, and the cooldown has run out or a probe was asked for, unless
// this instance is already probing.
func (m *model) wake(i int) probePlan {
	in := &m.inst[i]
	m.publish(i)
	s := m.state(i)
	if in.probeNow != 0 && in.probeNow-1 != s.Generation {
		in.probeNow = 0 // asked at a generation that has ended: moot
	}
	if !s.Open || s.Disabled {
		in.probeNow = 0 // a request for a closed or disabled backend is not remembered
		return probePlan{}
	}
	if s.CooldownLeft > 0 && in.probeNow == 0 {
		return probePlan{}
	}
	if in.probing {
		return probePlan{} // the running probe answers the request
	}
	p := probePlan{started: true, early: in.probeNow != 0, askedAt: s.Generation}
	in.probing, in.probeNow = true, 0
	return p
}

// probeStart is the probe Run started, from when its goroutine runs: take
// the lock, re-read the Store, and dial only if it is still open, enabled
// and the cooldown has run out (or the probe was asked for).
func (m *model) probeStart(i int, p *probePlan) {
	if in := &m.inst[i]; in.local != nil {
		// An open alone: re-read the Store (a fleet open ends it), then
		// dial at the local generation once its cooldown ran out.
		p.local = true
		m.publish(i)
		lo := in.local
		if lo == nil || in.view.Open || in.view.Disabled || (lo.until.After(m.local(in)) && !p.early) {
			return
		}
		p.dial, p.gen, p.lgen = true, in.view.Generation, lo.gen
		return
	}
	if o := m.store.lockOwner; o >= 0 && m.now().Before(m.store.lockUntil) {
		return // another instance (or this one) holds the lock
	}
	m.store.lockOwner, m.store.lockUntil = i, m.now().Add(m.lockTTL)
	p.locked = true
	m.publish(i)
	st := m.storeState()
	if !st.Open || st.Disabled || (st.CooldownLeft > 0 && !(p.early && st.Generation == p.askedAt)) {
		return
	}
	p.dial, p.gen, p.lgen = true, st.Generation, m.inst[i].localGen
}

// wakeEnd finishes what wake began: the probe's result (if it dialled),
// the lock released by its owner, and Run's flags cleared.
func (m *model) wakeEnd(i int, p probePlan, r Result) {
	if !p.started {
		return
	}
	if p.dial {
		m.done(i, Attempt{Kind: KindProbe, Generation: p.gen, LocalGeneration: p.lgen}, r)
	}
	if p.locked && m.store.lockOwner == i {
		m.store.lockOwner, m.store.lockUntil = -1, time.Time{}
	}
	in := &m.inst[i]
	in.probeNow, in.probing = 0, false
}
