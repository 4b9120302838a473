package breaker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The harness behind FuzzBreakerModel: it decodes an input into a fleet of
// 2-3 Breakers sharing one MemoryStore (same key) on a synthetic clock and a
// sequence of at most fuzzMaxOps operations, runs each on the real Breakers
// and on the reference model (model_test.go), and after every operation
// checks that they agree and that the invariants hold.
//
// Nothing runs on a goroutine: Run is not started, and every input replays
// exactly. Concurrency is had by nesting instead. Run's wake-up is the
// operation opWake, which does what one turn of Run's loop does (refresh,
// then the probe if one is due or asked for) and calls the real probe path
// (b.probe), optionally after a few more operations (the probe goroutine
// starting late). A probe dial stays in flight while the operations that
// follow it run: the fake Probe reads them until opProbeReturn says how the
// dial ended, or until the probe's deadline (the lock TTL) passes, which
// ends it as a failure. A slow Refresh (opSlowRefresh) reads the Store and
// returns after the next few operations, as a background refresh overtaken
// by events would.

// Input layout: fuzzHeaderLen header bytes, then two bytes per operation
// (opcode, argument).
const (
	fuzzHeaderLen = 8
	fuzzMaxOps    = 200
	fuzzMaxOut    = 32 // outstanding attempts kept; more Begins are skipped
)

const (
	opBeginClient = iota // arg: instance
	opBeginForce         // arg: instance (skipped when its snapshot says disabled)
	opBeginProbe         // arg: instance (a probe-kind attempt outside the probe path)
	opDone               // arg: outstanding index*3 + result
	opDone2              // the same, twice as likely
	opStepSmall          // arg: fuzzSmallSteps index
	opStepLarge          // arg: fuzzLargeSteps index
	opRefresh            // arg: instance
	opDisable            // arg: instance
	opEnable             // arg: instance
	opProbeNow           // arg: instance
	opWake               // arg: instance | d<<2; one turn of Run's loop, its probe goroutine starting after the next d%4 operations
	opProbeReturn        // arg: 0 success, 1 failure, 2 local, 3 shutdown (inside a probe only)
	opFailClient         // arg: instance; Begin + Done(Failure)
	opOkClient           // arg: instance; Begin + Done(Success)
	opForceNow           // arg: instance | result<<2; Begin(force) + Done
	opSlowRefresh        // arg: instance | k<<2; a Refresh whose Read returns after the next 1+k%4 operations
	fuzzOpCount
)

var (
	fuzzSmallSteps = [8]time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond,
		499 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second}
	fuzzLargeSteps = [8]time.Duration{5 * time.Second, 10 * time.Second, 29 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 10 * time.Minute, time.Hour}
	fuzzWindows   = [4]time.Duration{time.Second, 10 * time.Second, time.Minute, 2 * time.Minute}
	fuzzRatios    = [4]float64{0, 0, 0.5, 0.9}
	fuzzVolumes   = [4]int{0, 1, 3, 6}
	fuzzCooldowns = [4]time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}
	fuzzMaxMult   = [4]time.Duration{1, 2, 4, 10}
	fuzzLockTTLs  = [3]time.Duration{500 * time.Millisecond, 2 * time.Second, 10 * time.Second}
	fuzzJitters   = [4]float64{0.5, 0, 0.999999, 0.25}
	fuzzSkews     = [4]time.Duration{0, -5 * time.Hour, 7 * time.Hour, time.Millisecond}
)

// fuzzAttempt is an Attempt handed out by Begin, with where and when.
type fuzzAttempt struct {
	Attempt
	inst int
	seq  uint64 // order of Begins and transitions
}

// fuzzStats say what a run reached; the seed test checks them.
type fuzzStats struct {
	ops, trips, closes, reopens, stale, probes, earlyProbes, lockedOut int
	closeByForce, closeByProbe, staleSuccess, disabledOpen, slowReads  int
	// The trip quorum: transitions of an instance's open alone, and
	// instances whose open alone ended in the fleet's.
	localTrips, localCloses, localReopens, joins int
}

type fuzzHarness struct {
	t    testing.TB
	data []byte
	pos  int

	now    time.Time // the Store's clock; instance i reads now + skew[i]
	cfg    Config
	ttl    time.Duration
	quorum int // the fleet's trip quorum (fuzzStore.Vote)
	store  *MemoryStore
	votes  map[int]modelVote // fuzzStore.Vote's, by instance
	b      []*Breaker
	m      *model

	out []fuzzAttempt // outstanding attempts, oldest first

	events   []fuzzEvent       // what the hooks saw during this operation
	seq      uint64            // counter ordering Begins and transitions
	openedAt map[uint64]uint64 // open generation -> seq when it was opened
	// localAt[i] maps instance i's local generations of an open alone to
	// the seq it opened at; localCool[i] is that open's nominal cooldown.
	localAt   []map[uint64]uint64
	localCool []time.Duration
	hadLocal  []bool // instance i had an open alone after the last check
	lastGen   uint64 // the Store's generation as last checked
	lastDis   bool   // the Store's disable as last checked

	// The Done being applied: its attempt, its result, the Store before.
	cause       *fuzzAttempt
	causeResult Result
	before      State

	wk       *wakeRun // the wake-up in progress, while its probe may dial
	inFlight int      // probe dials of the fleet's open in flight, all instances
	localFly []bool   // instance i's probe of its open alone is in flight
	probeCtx context.CancelFunc
	slow     int       // the next Store Read returns after this many operations
	deadline time.Time // the in-flight probe's deadline; zero: none
	timedOut bool      // the clock reached it: the probe ends
	op       string    // the operation being run, for messages
	trace    []string

	stats fuzzStats
}

func (h *fuzzHarness) byte() (byte, bool) {
	if h.pos >= len(h.data) {
		return 0, false
	}
	c := h.data[h.pos]
	h.pos++
	return c, true
}

func (h *fuzzHarness) failf(format string, a ...any) {
	h.t.Helper()
	tail := h.trace
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	h.t.Fatalf("op %d (%s): %s\nlast operations:\n  %s", h.stats.ops, h.op, fmt.Sprintf(format, a...), strings.Join(tail, "\n  "))
}

// newFuzzHarness decodes the header and builds the fleet.
func newFuzzHarness(t testing.TB, data []byte) *fuzzHarness {
	var hd [fuzzHeaderLen]byte
	copy(hd[:], data)
	h := &fuzzHarness{t: t, data: data, pos: min(len(data), fuzzHeaderLen), openedAt: map[uint64]uint64{}}
	h.now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 2 + int(hd[0]%2)
	h.quorum = 1 + int(hd[0]/2)%3
	h.votes = map[int]modelVote{}
	cooldown := fuzzCooldowns[hd[3]%4]
	h.cfg = Config{
		Failures:    1 + int(hd[1]%4),
		Window:      fuzzWindows[hd[2]%4],
		MinRatio:    fuzzRatios[(hd[2]/4)%4],
		MinVolume:   fuzzVolumes[(hd[2]/16)%4],
		Cooldown:    cooldown,
		MaxCooldown: cooldown * fuzzMaxMult[(hd[3]/4)%4],
		Successes:   1 + int(hd[4]%3),
	}
	h.ttl = fuzzLockTTLs[hd[5]%3]
	skews := make([]time.Duration, n)
	jitters := make([]float64, n)
	for i := range n {
		jitters[i] = fuzzJitters[(hd[6]>>(2*i))%4]
		skews[i] = fuzzSkews[(hd[7]>>(2*i))%4]
	}
	h.store = NewMemoryStore(nowClock{now: func() time.Time { return h.now }})
	h.m = newModel(h.cfg, h.ttl, h.quorum, func() time.Time { return h.now }, skews, jitters)
	for i := range n {
		skew, jitter := skews[i], jitters[i]
		h.localAt = append(h.localAt, map[uint64]uint64{})
		h.localCool = append(h.localCool, 0)
		h.hadLocal = append(h.hadLocal, false)
		h.localFly = append(h.localFly, false)
		b, err := New(testKey, h.cfg, &fuzzStore{MemoryStore: h.store, h: h, inst: i}, Options{
			Clock:        nowClock{now: func() time.Time { return h.now.Add(skew) }},
			Rand:         func() float64 { return jitter },
			Events:       h.hooks(i),
			Probe:        h.fakeProbe(i),
			ProbeLockTTL: h.ttl,
			Owner:        fmt.Sprintf("i%d", i),
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		h.b = append(h.b, b)
	}
	h.trace = append(h.trace, fmt.Sprintf("fleet of %d, trip quorum %d: %+v lockTTL=%v skews=%v jitters=%v", n, h.quorum, h.cfg, h.ttl, skews, jitters))
	h.check(false)
	return h
}

// run executes every operation of the input.
func (h *fuzzHarness) run() fuzzStats {
	for h.stats.ops < fuzzMaxOps {
		op, ok := h.byte()
		if !ok {
			break
		}
		arg, _ := h.byte()
		h.exec(int(op)%fuzzOpCount, arg)
	}
	return h.stats
}

func (h *fuzzHarness) inst(arg byte) int { return int(arg&3) % len(h.b) }

// exec runs one operation on the fleet and on the model, then checks.
func (h *fuzzHarness) exec(op int, arg byte) {
	h.stats.ops++
	h.events = h.events[:0]
	h.m.events = h.m.events[:0]
	ctx := context.Background()
	toggled := false
	switch op {
	case opBeginClient:
		h.begin(h.inst(arg), KindClient)
	case opBeginForce:
		h.begin(h.inst(arg), KindForce)
	case opBeginProbe:
		h.begin(h.inst(arg), KindProbe)
	case opDone, opDone2:
		if len(h.out) == 0 {
			h.note("done: nothing outstanding")
			break
		}
		h.done(int(arg/3)%len(h.out), Result(arg%3))
	case opStepSmall:
		h.step(fuzzSmallSteps[arg%8])
	case opStepLarge:
		h.step(fuzzLargeSteps[arg%8])
	case opRefresh:
		i := h.inst(arg)
		h.note("refresh i%d", i)
		if err := h.b[i].Refresh(ctx); err != nil {
			h.failf("Refresh: %v", err)
		}
		h.m.publish(i)
	case opDisable, opEnable:
		i, on := h.inst(arg), op == opDisable
		h.note("disable=%v on i%d", on, i)
		var err error
		if on {
			err = h.b[i].Disable(ctx)
		} else {
			err = h.b[i].Enable(ctx)
		}
		if err != nil {
			h.failf("Disable/Enable: %v", err)
		}
		h.m.setDisabled(i, on)
		if st := h.storeRead(); st.Disabled != on {
			h.failf("after Disable/Enable the Store says disabled=%v", st.Disabled)
		}
		toggled = true
	case opProbeNow:
		i := h.inst(arg)
		h.note("ProbeNow i%d", i)
		h.b[i].ProbeNow()
		h.m.inst[i].probeNow = h.m.state(i).Generation + 1
	case opWake:
		h.wake(h.inst(arg), int(arg>>2)%4)
	case opSlowRefresh:
		h.slowRefresh(h.inst(arg), 1+int(arg>>2)%4)
	case opProbeReturn:
		h.note("probe return outside a probe: no-op")
	case opFailClient, opOkClient:
		i := h.inst(arg)
		r := Success
		if op == opFailClient {
			r = Failure
		}
		if h.begin(i, KindClient) {
			h.done(len(h.out)-1, r)
		}
	case opForceNow:
		i := h.inst(arg)
		if h.begin(i, KindForce) {
			h.done(len(h.out)-1, Result((arg>>2)%3))
		}
	}
	h.check(toggled)
}

func (h *fuzzHarness) note(format string, a ...any) {
	h.op = fmt.Sprintf(format, a...)
	h.trace = append(h.trace, fmt.Sprintf("%3d t+%v: %s", h.stats.ops, h.now.Sub(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), h.op))
}

// begin hands out an Attempt of kind k on instance i, as the data path
// would. A force-try is only made at a backend its snapshot does not show
// disabled (ChooseForceTry skips disabled backends, rule 6).
func (h *fuzzHarness) begin(i int, k Kind) bool {
	if len(h.out) >= fuzzMaxOut {
		h.note("begin %s i%d: too many outstanding, skipped", k, i)
		return false
	}
	if k == KindForce {
		if _, ok := ChooseForceTry([]State{h.b[i].State()}); !ok {
			h.note("begin force i%d: disabled, not chosen", i)
			return false
		}
	}
	a := h.b[i].Begin(k)
	h.seq++
	fa := fuzzAttempt{Attempt: a, inst: i, seq: h.seq}
	h.note("begin %s i%d gen %d (#%d)", k, i, a.Generation, len(h.out))
	if want := h.m.inst[i].view.Generation; a.Generation != want {
		h.failf("Begin captured generation %d, the snapshot holds %d", a.Generation, want)
	}
	if want := h.m.inst[i].localGen; a.LocalGeneration != want {
		h.failf("Begin captured local generation %d, the model says %d", a.LocalGeneration, want)
	}
	if st := h.storeRead(); a.Generation > st.Generation {
		h.failf("Begin captured generation %d, ahead of the Store's %d", a.Generation, st.Generation)
	}
	h.out = append(h.out, fa)
	return true
}

// done hands outstanding attempt j its result.
func (h *fuzzHarness) done(j int, r Result) {
	fa := h.out[j]
	h.out = append(h.out[:j], h.out[j+1:]...)
	h.note("done %s i%d gen %d -> %s", fa.Kind, fa.inst, fa.Generation, r)
	before := h.storeRead()
	if r == Success && fa.LocalGeneration < h.b[fa.inst].localGen.Load() && h.b[fa.inst].local.Load() != nil {
		h.stats.staleSuccess++ // begun before the instance's open alone
	}
	h.cause, h.causeResult, h.before = &fa, r, before
	h.b[fa.inst].Done(fa.Attempt, r)
	h.cause = nil
	h.m.done(fa.inst, fa.Attempt, r)
	after := h.storeRead()
	if fa.Kind == KindForce && r == Failure {
		// Rule 6: a failed force-try changes nothing, open or closed.
		if after != before || h.transitions() != 0 {
			h.failf("failed force-try changed the Store: %+v -> %+v", before, after)
		}
	}
	if r == Local && after != before {
		h.failf("local trouble changed the Store: %+v -> %+v", before, after)
	}
	if fa.Generation < before.Generation && r == Success && before.Open {
		h.stats.staleSuccess++
	}
}

func (h *fuzzHarness) transitions() int {
	n := 0
	for _, e := range h.events {
		switch e.name {
		case "trip", "close", "reopen":
			if !e.local {
				n++
			}
		}
	}
	return n
}

// step advances the clock. Outside a probe nothing else happens (Run is
// not running); inside one see probeOps.
func (h *fuzzHarness) step(d time.Duration) {
	h.note("sleep %v", d)
	h.now = h.now.Add(d)
	if !h.deadline.IsZero() && !h.now.Before(h.deadline) {
		// A probe dial is in flight and its deadline comes first: it
		// ends there (probeOps), and nothing else happens at or after
		// the deadline before it has ended, so its lock (which expires
		// at the deadline) is never taken while it dials.
		h.now = h.deadline.Add(-time.Nanosecond)
		h.timedOut = true
	}
}

// wakeRun is one wake-up in progress: what the model planned and what the
// fake Probe saw.
type wakeRun struct {
	plan    probePlan
	dialled bool
	result  Result
}

// wake is one turn of Run's loop, run synchronously: Refresh, then, if the
// snapshot is open and enabled and the cooldown has run out or ProbeNow
// asked, the probe (unless this instance is probing already). Run starts
// b.probe on a goroutine of its own; here the next delay operations of the
// input run before it gets going (a Disable, a close, another instance's
// probe may come first).
func (h *fuzzHarness) wake(i, delay int) {
	h.note("wake i%d (probe starts after %d operations)", i, delay)
	b := h.b[i]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &wakeRun{plan: h.m.wake(i)}
	outer, outerCancel := h.wk, h.probeCtx
	h.wk, h.probeCtx = w, cancel

	if err := b.Refresh(ctx); err != nil {
		h.failf("Refresh: %v", err)
	}
	started := false
	s := b.State()
	if req := b.probeNow.Load(); req != 0 && req-1 != s.Generation {
		b.probeNow.CompareAndSwap(req, 0)
	}
	if !s.Open || s.Disabled {
		b.probeNow.Store(0)
	} else if early := b.probeNow.Load() != 0; s.CooldownLeft > 0 && !early {
		// wait for the cooldown
	} else if b.probing.CompareAndSwap(false, true) {
		started = true
		b.probeNow.Store(0)
		if !w.plan.started || early != w.plan.early {
			h.failf("Run starts a probe (early=%v); the model says %+v", early, w.plan)
		}
		h.nested(delay)
		h.m.probeStart(i, &w.plan)
		b.probe(ctx, early, s.Generation)
		b.probeNow.Store(0)
		b.probing.Store(false)
	}
	if started != w.plan.started {
		h.failf("Run started its probe: %v; the model says %+v", started, w.plan)
	}

	h.wk, h.probeCtx = outer, outerCancel
	if w.plan.dial && !w.dialled {
		h.failf("the model expected a probe dial at generation %d; none was made", w.plan.gen)
	}
	if w.plan.started && !w.plan.locked && !w.plan.local {
		h.stats.lockedOut++
	}
	h.m.wakeEnd(i, w.plan, w.result)
	h.cause = nil
}

// nested runs up to k operations of the input inside the current one.
func (h *fuzzHarness) nested(k int) {
	for ; k > 0 && h.stats.ops < fuzzMaxOps; k-- {
		op, ok := h.byte()
		if !ok {
			return
		}
		arg, _ := h.byte()
		h.exec(int(op)%fuzzOpCount, arg)
	}
}

// fuzzStore is the Store the Breakers use: the harness's MemoryStore, whose
// Read can be made slow, and a trip quorum (Quorum) on the Store's clock.
// A slow Read sees the Store at once and returns after the next few
// operations of the input have run. Each instance has its own, as each
// l4lb process has its own fleet Store: inst is its vote.
type fuzzStore struct {
	*MemoryStore
	h    *fuzzHarness
	inst int
}

var _ Quorum = (*fuzzStore)(nil)

// Trip is never called on a Store that counts votes: a breaker trips
// through Vote, and only a quorum opens the breaker for the fleet.
func (s *fuzzStore) Trip(ctx context.Context, key string, seen uint64, cooldown, ttl time.Duration) (State, bool, error) {
	s.h.failf("Trip called on a Store with a trip quorum: only Vote may open the breaker")
	return State{}, false, nil
}

// Vote implements Quorum as pkg/fleet's script does: closed at seen, the
// instance's vote at the Store's time, votes of this generation within
// window counted, the breaker opened at the quorum and the votes spent.
func (s *fuzzStore) Vote(ctx context.Context, key string, seen uint64, cooldown, ttl, window time.Duration) (State, bool, bool, error) {
	h := s.h
	st, err := s.MemoryStore.Read(ctx, key)
	if err != nil || st.Open || st.Generation != seen {
		return st, false, false, err
	}
	if h.quorum > 1 {
		h.votes[s.inst] = modelVote{at: h.now, gen: st.Generation}
		live := 0
		for _, v := range h.votes {
			if v.gen == st.Generation && h.now.Sub(v.at) < window {
				live++
			}
		}
		if live < h.quorum {
			return st, false, true, nil
		}
		clear(h.votes)
	}
	st, ok, err := s.MemoryStore.Trip(ctx, key, seen, cooldown, ttl)
	return st, ok, false, err
}

// Unvote implements Quorum.
func (s *fuzzStore) Unvote(ctx context.Context, key string) error {
	delete(s.h.votes, s.inst)
	return ctx.Err()
}

func (s *fuzzStore) Read(ctx context.Context, key string) (State, error) {
	st, err := s.MemoryStore.Read(ctx, key)
	if k := s.h.slow; k > 0 && err == nil {
		s.h.slow = 0
		s.h.nested(k)
	}
	return st, err
}

// slowRefresh is a Refresh of instance i whose Read returns only after k
// more operations: a background refresh overtaken by other events (rule 8).
func (h *fuzzHarness) slowRefresh(i, k int) {
	h.note("slow refresh i%d (returns after %d operations)", i, k)
	seen := h.m.read() // the real Read sees the Store at this point too
	h.slow = k
	if err := h.b[i].Refresh(context.Background()); err != nil {
		h.failf("Refresh: %v", err)
	}
	h.slow = 0
	h.note("slow refresh i%d returns %+v", i, seen.st)
	h.stats.slowReads++
	h.m.install(i, seen)
}

// fakeProbe is Options.Probe for instance i: the dial stays in flight while
// the input's next operations run, until opProbeReturn or the deadline.
func (h *fuzzHarness) fakeProbe(i int) func(ctx context.Context) Result {
	return func(ctx context.Context) Result {
		w := h.wk
		st := h.storeRead()
		h.note("probe dial i%d gen %d (cooldown left %v)", i, st.Generation, st.CooldownLeft)
		if w != nil && w.plan.local {
			h.checkLocalProbe(i, w)
			st = h.b[i].State()
		} else {
			switch {
			case w == nil || !w.plan.dial || w.dialled:
				h.failf("probe dialled at i%d; the model says no probe is due", i)
			case h.inFlight != 0:
				h.failf("two probes in flight")
			case !st.Open || st.Disabled:
				h.failf("probe of a closed or disabled backend: %+v", st)
			case st.CooldownLeft > 0 && !(w.plan.early && st.Generation == w.plan.askedAt):
				h.failf("probe %v before the cooldown ran out, not asked for", st.CooldownLeft)
			case st.Generation != w.plan.gen:
				h.failf("probe captured generation %d, the model says %d", st.Generation, w.plan.gen)
			case !h.lockHeldBy(i):
				h.failf("probe dials without holding the Store's probe lock")
			}
		}
		h.stats.probes++
		if st.CooldownLeft > 0 {
			h.stats.earlyProbes++
		}
		h.seq++
		fa := fuzzAttempt{Attempt: Attempt{Kind: KindProbe, Generation: w.plan.gen, LocalGeneration: w.plan.lgen}, inst: i, seq: h.seq}
		w.dialled = true
		fly := &h.inFlight
		var local int
		if w.plan.local {
			h.localFly[i] = true
			fly = &local
		}
		*fly++
		r, shutdown := h.probeOps(h.now.Add(h.ttl))
		*fly--
		h.localFly[i] = false
		if shutdown {
			h.probeCtx() // Run's context ends while the probe dials,
			r = Local    // which b.probe reports as local trouble
		}
		w.result = r
		h.note("probe return i%d gen %d -> %s (shutdown %v)", i, fa.Generation, r, shutdown)
		h.events = h.events[:0]
		h.m.events = h.m.events[:0]
		h.cause, h.causeResult, h.before = &fa, r, h.storeRead()
		if shutdown {
			return Success // b.probe must override it: its ctx is done
		}
		return r
	}
}

// probeOps runs the input's operations while a probe is in flight, until
// opProbeReturn says how it ended. The probe ends as a failure (timed out)
// when the clock reaches its deadline, which is also when its lock expires
// (see step), or when the input runs out.
//
// Probes of opens alone run beside one another (one per instance): a probe
// begun inside another's dial ends at the earlier of the two deadlines, as
// a failure if it comes first, so that the outer one's still times out at
// its own.
func (h *fuzzHarness) probeOps(deadline time.Time) (Result, bool) {
	outer := h.deadline
	h.deadline, h.timedOut = deadline, false
	if !outer.IsZero() && outer.Before(deadline) {
		h.deadline = outer
	}
	own := h.deadline.Equal(deadline)
	defer func() { h.deadline, h.timedOut = outer, false }()
	for h.stats.ops < fuzzMaxOps && !h.timedOut {
		op, ok := h.byte()
		if !ok {
			break
		}
		arg, _ := h.byte()
		if op%fuzzOpCount != opProbeReturn {
			h.exec(int(op%fuzzOpCount), arg)
			continue
		}
		h.stats.ops++
		switch arg % 4 {
		case 0:
			return Success, false
		case 1:
			return Failure, false
		case 2:
			return Local, false
		}
		return Local, true
	}
	h.note("the probe times out at its deadline")
	if own {
		h.now = deadline
	}
	return Failure, false
}

// checkLocalProbe holds the probe of instance i's open alone to the rules:
// due by the model, the instance's own open (enabled, cooldown out or
// asked for), at its local generation, one per instance, no lock.
func (h *fuzzHarness) checkLocalProbe(i int, w *wakeRun) {
	lo := h.b[i].local.Load()
	st := h.b[i].State()
	switch {
	case !w.plan.dial || w.dialled:
		h.failf("local probe dialled at i%d; the model says no probe is due", i)
	case h.localFly[i]:
		h.failf("two local probes in flight at i%d", i)
	case lo == nil || !st.LocalOnly || st.Disabled:
		h.failf("local probe at i%d without an open alone, or disabled: %+v", i, st)
	case st.CooldownLeft > 0 && !w.plan.early:
		h.failf("local probe %v before its cooldown ran out, not asked for", st.CooldownLeft)
	case lo.gen != w.plan.lgen || st.Generation != w.plan.gen:
		h.failf("local probe captures %d/%d, the model says %d/%d", st.Generation, lo.gen, w.plan.gen, w.plan.lgen)
	}
}

// hooks are instance i's Events: each records what it saw and checks the
// transition against its cause.
func (h *fuzzHarness) hooks(i int) Events {
	rec := func(name string) func(string) {
		return func(string) { h.events = append(h.events, fuzzEvent{name: name, inst: i}) }
	}
	transition := func(name string) func(string, State) {
		return func(_ string, st State) {
			// A transition that left the Store as it was is one of the
			// instance's open alone.
			local := h.cause != nil && h.storeRead() == h.before
			h.events = append(h.events, fuzzEvent{name: name, inst: i, st: st, local: local})
			if local {
				h.checkLocalTransition(name, i, st)
				return
			}
			h.checkTransition(name, i, st)
		}
	}
	return Events{
		Trip: transition("trip"), Close: transition("close"), Reopen: transition("reopen"),
		ProbeFailure: rec("probe_failure"), Stale: rec("stale"),
		Dial: func(_ string, k Kind, r Result) {
			h.events = append(h.events, fuzzEvent{name: "dial", inst: i, kind: k, res: r})
		},
	}
}

// checkTransition holds each transition to its cause (the Done being
// applied) and to the rules, independently of the model.
func (h *fuzzHarness) checkTransition(name string, i int, st State) {
	c, r, before := h.cause, h.causeResult, h.before
	if c == nil {
		h.failf("%s at i%d outside any Done", name, i)
		return
	}
	if c.inst != i {
		h.failf("%s reported by i%d for a result of i%d", name, i, c.inst)
	}
	if got := h.storeRead(); got != st {
		h.failf("%s hook state %+v, the Store says %+v", name, st, got)
	}
	if st.Generation != before.Generation+1 {
		h.failf("%s moved the generation %d -> %d, not by one", name, before.Generation, st.Generation)
	}
	if st.Disabled != before.Disabled {
		h.failf("%s changed the manual disable", name)
	}
	h.seq++
	switch name {
	case "trip":
		h.stats.trips++
		switch {
		case r != Failure || c.Kind == KindForce:
			h.failf("trip caused by a %s %s", c.Kind, r)
		case before.Open || c.Generation != before.Generation:
			h.failf("trip from %+v by a result of generation %d", before, c.Generation)
		case !st.Open || st.Cooldown != h.cfg.Cooldown || st.CooldownLeft != h.cfg.Cooldown:
			h.failf("trip must open with exactly cooldown %v: %+v", h.cfg.Cooldown, st)
		}
		h.openedAt[st.Generation] = h.seq
	case "close":
		h.stats.closes++
		if c.Kind == KindForce {
			h.stats.closeByForce++
		} else {
			h.stats.closeByProbe++
		}
		switch {
		case r != Success || c.Kind == KindClient:
			h.failf("close caused by a %s %s", c.Kind, r)
		case !before.Open || c.Generation != before.Generation:
			// Never closed on stale evidence: the dial captured the very
			// open generation it closes.
			h.failf("close of %+v by a %s that captured generation %d", before, c.Kind, c.Generation)
		case c.seq <= h.openedAt[c.Generation]:
			h.failf("close by a dial begun (#%d) before its generation %d opened (#%d)", c.seq, c.Generation, h.openedAt[c.Generation])
		case st.Open:
			h.failf("close left the breaker open: %+v", st)
		}
	case "reopen":
		h.stats.reopens++
		next := min(max(2*before.Cooldown, h.cfg.Cooldown), h.cfg.MaxCooldown)
		lo := min(time.Duration(float64(next)*0.9), h.cfg.MaxCooldown)
		hi := min(time.Duration(float64(next)*1.1), h.cfg.MaxCooldown)
		switch {
		case r != Failure || c.Kind != KindProbe:
			h.failf("re-open caused by a %s %s", c.Kind, r)
		case !before.Open || c.Generation != before.Generation:
			h.failf("re-open of %+v by a probe of generation %d", before, c.Generation)
		case !st.Open || st.Cooldown != next:
			h.failf("re-open: cooldown %v -> %v, want %v (doubled, capped at %v)", before.Cooldown, st.Cooldown, next, h.cfg.MaxCooldown)
		case st.CooldownLeft < lo || st.CooldownLeft > hi:
			h.failf("re-open: next probe in %v, want within [%v, %v]", st.CooldownLeft, lo, hi)
		}
		h.openedAt[st.Generation] = h.seq
	}
}

// checkLocalTransition holds a transition of instance i's open alone to its
// cause and to the rules, independently of the model: only below a quorum;
// a close only by a success of a dial that captured the very local
// generation it closes and began after that open began (no stale close);
// a re-open only by a failed probe, with the doubled cooldown.
func (h *fuzzHarness) checkLocalTransition(name string, i int, st State) {
	c, r, before := h.cause, h.causeResult, h.before
	if c.inst != i {
		h.failf("local %s reported by i%d for a result of i%d", name, i, c.inst)
	}
	if h.quorum <= 1 {
		h.failf("local %s with a trip quorum of 1: every trip is the fleet's", name)
	}
	// The Store may have moved on where this instance has not looked yet
	// (a quorum made elsewhere): a local transition is judged by what
	// the instance sees, and changes nothing in the Store.
	if snap := h.b[i].snap.Load(); st.Generation != snap.Generation || st.Disabled != snap.Disabled {
		h.failf("local %s reports %+v, the instance's snapshot holds %+v", name, st, snap.State)
	}
	lgen := h.b[i].localGen.Load()
	if c.LocalGeneration+1 != lgen {
		h.failf("local %s by a result of local generation %d; it is now %d, not one above", name, c.LocalGeneration, lgen)
	}
	h.seq++
	switch name {
	case "trip":
		h.stats.localTrips++
		switch {
		case r != Failure || c.Kind == KindForce:
			h.failf("local trip caused by a %s %s", c.Kind, r)
		case before.Open || c.Generation != before.Generation:
			h.failf("local trip from %+v by a result of generation %d", before, c.Generation)
		case !st.Open || !st.LocalOnly || st.Cooldown != h.cfg.Cooldown || st.CooldownLeft != h.cfg.Cooldown:
			h.failf("local trip must open alone with exactly cooldown %v: %+v", h.cfg.Cooldown, st)
		case h.votes[i].gen != before.Generation || !h.votes[i].at.Equal(h.now):
			h.failf("local trip at i%d without its vote: %+v", i, h.votes)
		}
		h.localAt[i][lgen], h.localCool[i] = h.seq, st.Cooldown
	case "close":
		h.stats.localCloses++
		switch {
		case r != Success || c.Kind == KindClient:
			h.failf("local close caused by a %s %s", c.Kind, r)
		case c.seq <= h.localAt[i][c.LocalGeneration]:
			h.failf("local close by a dial begun (#%d) before its open alone (local generation %d, #%d)", c.seq, c.LocalGeneration, h.localAt[i][c.LocalGeneration])
		case st.Open:
			h.failf("local close left the breaker open: %+v", st)
		case h.votes[i] != (modelVote{}):
			h.failf("local close kept i%d's vote", i)
		}
	case "reopen":
		h.stats.localReopens++
		next := min(max(2*h.localCool[i], h.cfg.Cooldown), h.cfg.MaxCooldown)
		lo := min(time.Duration(float64(next)*0.9), h.cfg.MaxCooldown)
		hi := min(time.Duration(float64(next)*1.1), h.cfg.MaxCooldown)
		switch {
		case r != Failure || c.Kind != KindProbe:
			h.failf("local re-open caused by a %s %s", c.Kind, r)
		case !st.LocalOnly || st.Cooldown != next:
			h.failf("local re-open: cooldown %v -> %v, want %v", h.localCool[i], st.Cooldown, next)
		case st.CooldownLeft < lo || st.CooldownLeft > hi:
			h.failf("local re-open: next probe in %v, want within [%v, %v]", st.CooldownLeft, lo, hi)
		}
		h.localAt[i][lgen], h.localCool[i] = h.seq, st.Cooldown
	}
}

func (h *fuzzHarness) storeRead() State {
	st, err := h.store.Read(context.Background(), testKey)
	if err != nil {
		h.failf("Store.Read: %v", err)
	}
	return st
}

func (h *fuzzHarness) lockHeldBy(i int) bool {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	l, ok := h.store.locks[testKey]
	return ok && l.owner == fmt.Sprintf("i%d", i) && h.now.Before(l.until)
}

// check compares the fleet with the model after an operation, and checks
// the invariants that hold whatever the model says.
func (h *fuzzHarness) check(toggled bool) {
	st := h.storeRead()
	if want := h.m.storeState(); st != want {
		h.failf("Store %+v, the model says %+v", st, want)
	}
	if st.Generation < h.lastGen {
		h.failf("generation went down: %d -> %d", h.lastGen, st.Generation)
	}
	if n := h.transitions(); uint64(n) != st.Generation-h.lastGen {
		h.failf("generation %d -> %d with %d transitions reported", h.lastGen, st.Generation, n)
	}
	h.lastGen = st.Generation
	if !toggled && st.Disabled != h.lastDis {
		// Rule 5: nothing automatic sets or clears the manual disable.
		h.failf("the manual disable changed %v -> %v without Disable/Enable", h.lastDis, st.Disabled)
	}
	h.lastDis = st.Disabled
	if st.Open && st.Disabled {
		h.stats.disabledOpen++
	}
	h.checkLock()
	for i, b := range h.b {
		in := &h.m.inst[i]
		s := b.snap.Load()
		if s.Disabled != in.view.Disabled && s.Generation == in.view.Generation {
			h.failf("i%d snapshot says disabled=%v, the model %v: a read made before the last Disable/Enable undid it (rules 5, 8)", i, s.Disabled, in.view.Disabled)
		}
		if s.State != in.view || !s.readAt.Equal(in.readAt) {
			h.failf("i%d snapshot %+v read at %v, the model says %+v at %v", i, s.State, s.readAt, in.view, in.readAt)
		}
		if got, want := b.State(), h.m.state(i); got != want {
			h.failf("i%d State() %+v, the model says %+v", i, got, want)
		}
		if got, want := b.Allow(), h.m.allows(i); got != want {
			h.failf("i%d Allow() = %v, want %v", i, got, want)
		}
		lo := b.local.Load()
		switch {
		case b.localGen.Load() != in.localGen:
			h.failf("i%d local generation %d, the model says %d", i, b.localGen.Load(), in.localGen)
		case (lo == nil) != (in.local == nil):
			h.failf("i%d open alone: %+v, the model says %+v", i, lo, in.local)
		case lo != nil && (lo.gen != in.local.gen || lo.cooldown != in.local.cooldown || !lo.until.Equal(in.local.until)):
			h.failf("i%d open alone %+v, the model says %+v", i, *lo, *in.local)
		case lo != nil && h.quorum <= 1:
			h.failf("i%d open alone with a trip quorum of 1", i)
		}
		if h.hadLocal[i] && lo == nil && s.Open {
			h.stats.joins++ // its open alone ended in the fleet's
		}
		h.hadLocal[i] = lo != nil
		if b.probeNow.Load() != in.probeNow || b.probing.Load() != in.probing {
			h.failf("i%d probeNow=%v probing=%v, the model says %v %v", i, b.probeNow.Load(), b.probing.Load(), in.probeNow, in.probing)
		}
	}
	if !equalEvents(h.events, h.m.events) {
		h.failf("hooks saw\n    %v\n  the rules require\n    %v", h.events, h.m.events)
	}
	for _, e := range h.events {
		if e.name == "stale" {
			h.stats.stale++
		}
	}
	h.events = h.events[:0]
	h.m.events = h.m.events[:0]
}

func (h *fuzzHarness) checkLock() {
	h.store.mu.Lock()
	l, held := h.store.locks[testKey]
	h.store.mu.Unlock()
	o := h.m.store.lockOwner
	switch {
	case held != (o >= 0):
		h.failf("probe lock held=%v (%+v), the model says owner %d", held, l, o)
	case held && (l.owner != fmt.Sprintf("i%d", o) || !l.until.Equal(h.m.store.lockUntil)):
		h.failf("probe lock %+v, the model says i%d until %v", l, o, h.m.store.lockUntil)
	}
	if h.inFlight > 1 {
		h.failf("%d probes in flight", h.inFlight)
	}
}

func equalEvents(a, b []fuzzEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
