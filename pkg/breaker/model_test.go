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

	// Rule 3: successes of one open generation seen here.
	recGen uint64
	recN   int

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
	name string // dial, trip, close, reopen, probe_failure, stale
	inst int
	kind Kind   // dial only
	res  Result // dial only
	st   State  // trip, close, reopen only
}

func newModel(cfg Config, lockTTL time.Duration, now func() time.Time, skews []time.Duration, jitters []float64) *model {
	m := &model{cfg: cfg.withDefaults(), lockTTL: lockTTL, now: now, store: modelStore{lockOwner: -1}}
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
}

// publish installs a read that returns at once.
func (m *model) publish(i int) { m.install(i, m.read()) }

// state is Breaker.State: the snapshot with the cooldown aged locally.
func (m *model) state(i int) State {
	in := &m.inst[i]
	st := in.view
	st.CooldownLeft = max(0, st.CooldownLeft-m.local(in).Sub(in.readAt))
	return st
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
	case a.Generation < g: // any state, stale: ignored, counted
		m.emit(fuzzEvent{name: "stale", inst: i})
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
	// The trip is a CAS: closed, and still at the captured generation.
	if s := &m.store; !s.open && s.gen == a.Generation {
		s.gen++
		s.open, s.cooldown, s.until = true, m.cfg.Cooldown, m.now().Add(m.cfg.Cooldown)
		m.publish(i)
		m.emit(fuzzEvent{name: "trip", inst: i, st: m.storeState()})
		return
	}
	m.publish(i) // lost the race: learn the Store's state, no transition
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
	if in.recGen != a.Generation {
		in.recGen, in.recN = a.Generation, 0
	}
	in.recN++
	if in.recN < m.cfg.Successes {
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
	locked  bool   // the probe took the Store's lock
	dial    bool   // and dials: open, enabled, cooldown out or early
	early   bool   // the probe was asked for (ProbeNow)
	askedAt uint64 // the generation it was asked for
	gen     uint64 // the generation the dial captures
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
	p.dial, p.gen = true, st.Generation
}

// wakeEnd finishes what wake began: the probe's result (if it dialled),
// the lock released by its owner, and Run's flags cleared.
func (m *model) wakeEnd(i int, p probePlan, r Result) {
	if !p.started {
		return
	}
	if p.dial {
		m.done(i, Attempt{Kind: KindProbe, Generation: p.gen}, r)
	}
	if p.locked && m.store.lockOwner == i {
		m.store.lockOwner, m.store.lockUntil = -1, time.Time{}
	}
	in := &m.inst[i]
	in.probeNow, in.probing = 0, false
}
