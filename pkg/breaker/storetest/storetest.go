// Package storetest is the contract of breaker.Store as a reusable test
// suite: every Store implementation (the in-memory MemoryStore, a store on a
// server) runs the same Run from its own tests and so is held to the same
// rules.
//
// The suite is written for a store that really waits: its TTLs for expiry
// checks are a few hundred milliseconds, expiry is awaited by polling
// Harness.Elapse in small steps, and "not yet expired" is checked against
// long TTLs. Against a server the whole suite takes a couple of seconds of
// real time. Every subtest uses its own keys, unique in the process and
// across processes, so a server store may be shared between subtests and
// between runs; a store's generation counters are never deleted (that is
// part of the contract), so a shared server keeps the test keys.
package storetest

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// Harness is one Store under test and the way to let its time pass.
type Harness struct {
	// Store is a fresh, empty store (no key set).
	Store breaker.Store
	// Elapse lets d pass on the store's TTL clock: a fake clock's advance
	// for MemoryStore, a real sleep for a store on a server.
	Elapse func(d time.Duration)
}

// Run runs every contract test as a subtest of t. newHarness is called once
// per subtest (once per leaf: each case of a table gets its own), with that
// subtest's t, so it may register cleanups on it. Subtests run one after the
// other, never in parallel.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range contract {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, func(t *testing.T) *env { return newEnv(t, newHarness) })
		})
	}
}

// contract lists the contract tests in the order Run runs them.
var contract = []struct {
	name string
	run  func(t *testing.T, newEnv func(t *testing.T) *env)
}{
	{"CompareAndSet", testCompareAndSet},
	{"GenerationOnlyGoesUp", leaf(testGenerationOnlyGoesUp)},
	{"GenerationOutlivesTTLs", leaf(testGenerationOutlivesTTLs)},
	{"CooldownIsTimeRemaining", leaf(testCooldownIsTimeRemaining)},
	{"CooldownRunsOutButEntryStaysOpen", leaf(testCooldownRunsOut)},
	{"ReopenReplacesCooldownAndTTL", leaf(testReopenReplacesCooldownAndTTL)},
	{"ReadUnknownKey", leaf(testReadUnknownKey)},
	{"ProbeLockHasOneOwner", leaf(testProbeLockHasOneOwner)},
	{"ProbeLockExpires", leaf(testProbeLockExpires)},
	{"ProbeLockIsApartFromBreakerState", leaf(testProbeLockApart)},
	{"DisableIsApartFromBreakerEntries", leaf(testDisableApart)},
	{"DisableNeverTripped", leaf(testDisableNeverTripped)},
	{"CanceledContext", testCanceledContext},
	{"ConcurrentTripAndClose", leaf(testConcurrentTripAndClose)},
	{"ConcurrentCloseAndReopen", leaf(testConcurrentCloseAndReopen)},
	{"ConcurrentProbeAcquire", leaf(testConcurrentProbeAcquire)},
	{"KeysAreIndependent", leaf(testKeysAreIndependent)},
}

// leaf adapts a test that needs exactly one env.
func leaf(f func(e *env)) func(t *testing.T, newEnv func(t *testing.T) *env) {
	return func(t *testing.T, newEnv func(t *testing.T) *env) { f(newEnv(t)) }
}

const (
	// pollStep and pollBudget: expiry is awaited by Elapse(pollStep) until
	// the condition holds, failing after pollBudget of store time.
	pollStep   = 25 * time.Millisecond
	pollBudget = 5 * time.Second
	// leftSlack: a cooldown given ttl just now must read CooldownLeft in
	// (ttl-leftSlack, ttl], whatever the round trips to a server took.
	leftSlack = time.Second
	// longTTL is long enough never to run out during a subtest.
	longTTL = 10 * time.Second
)

// runID tells this process's keys from another's on a shared server;
// keySeq tells apart the runs of one subtest in a process (-count=N).
var (
	runID  = strconv.FormatInt(time.Now().UnixNano(), 36)
	keySeq atomic.Uint64
)

// env is one subtest: its store, its keys and checked shorthands for the
// Store's methods (each fails the test on an error).
type env struct {
	t    *testing.T
	s    breaker.Store
	h    Harness
	ctx  context.Context
	base string
}

func newEnv(t *testing.T, newHarness func(t *testing.T) Harness) *env {
	t.Helper()
	h := newHarness(t)
	if h.Store == nil || h.Elapse == nil {
		t.Fatal("storetest: newHarness returned a Harness without Store or Elapse")
	}
	base := "storetest/" + t.Name() + "@" + runID + "." + strconv.FormatUint(keySeq.Add(1), 10)
	return &env{t: t, s: h.Store, h: h, ctx: context.Background(), base: base}
}

// key returns the subtest's key named name.
func (e *env) key(name string) string { return e.base + "/" + name }

func (e *env) read(key string) breaker.State {
	e.t.Helper()
	st, err := e.s.Read(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Read(%q): %v", key, err)
	}
	return st
}

func (e *env) trip(key string, seen uint64, cooldown, ttl time.Duration) (breaker.State, bool) {
	e.t.Helper()
	st, ok, err := e.s.Trip(e.ctx, key, seen, cooldown, ttl)
	if err != nil {
		e.t.Fatalf("Trip(%q, seen %d): %v", key, seen, err)
	}
	return st, ok
}

// mustTrip trips key at seen and fails the test if that is refused.
func (e *env) mustTrip(key string, seen uint64, cooldown, ttl time.Duration) {
	e.t.Helper()
	if _, ok := e.trip(key, seen, cooldown, ttl); !ok {
		e.t.Fatalf("Trip(%q, seen %d) refused", key, seen)
	}
}

func (e *env) close(key string, gen uint64) (breaker.State, bool) {
	e.t.Helper()
	st, ok, err := e.s.Close(e.ctx, key, gen)
	if err != nil {
		e.t.Fatalf("Close(%q, gen %d): %v", key, gen, err)
	}
	return st, ok
}

func (e *env) reopen(key string, gen uint64, cooldown, ttl time.Duration) (breaker.State, bool) {
	e.t.Helper()
	st, ok, err := e.s.Reopen(e.ctx, key, gen, cooldown, ttl)
	if err != nil {
		e.t.Fatalf("Reopen(%q, gen %d): %v", key, gen, err)
	}
	return st, ok
}

func (e *env) acquire(key, owner string, ttl time.Duration) bool {
	e.t.Helper()
	got, err := e.s.AcquireProbe(e.ctx, key, owner, ttl)
	if err != nil {
		e.t.Fatalf("AcquireProbe(%q, %q): %v", key, owner, err)
	}
	return got
}

// mustAcquire checks what AcquireProbe with longTTL answers.
func (e *env) mustAcquire(key, owner string, want bool) {
	e.t.Helper()
	if got := e.acquire(key, owner, longTTL); got != want {
		e.t.Fatalf("AcquireProbe(%q) by %q = %v, want %v", key, owner, got, want)
	}
}

func (e *env) release(key, owner string) {
	e.t.Helper()
	if err := e.s.ReleaseProbe(e.ctx, key, owner); err != nil {
		e.t.Fatalf("ReleaseProbe(%q, %q): %v", key, owner, err)
	}
}

func (e *env) disable(key string) {
	e.t.Helper()
	if err := e.s.Disable(e.ctx, key); err != nil {
		e.t.Fatalf("Disable(%q): %v", key, err)
	}
}

func (e *env) enable(key string) {
	e.t.Helper()
	if err := e.s.Enable(e.ctx, key); err != nil {
		e.t.Fatalf("Enable(%q): %v", key, err)
	}
}

// eventually lets store time pass in pollSteps until cond holds, failing
// after pollBudget. cond is tried before the first step.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	var waited time.Duration
	for !cond() {
		if waited >= pollBudget {
			e.t.Fatalf("%s: still not so after %v of store time", what, waited)
		}
		e.h.Elapse(pollStep)
		waited += pollStep
	}
}

// want is an expected State. TTL is the ttl the open entry was given just
// now: CooldownLeft must be in (TTL-leftSlack, TTL]; TTL 0 means
// CooldownLeft must be 0 (closed, or run out).
type want struct {
	Generation uint64
	Open       bool
	Cooldown   time.Duration
	TTL        time.Duration
	Disabled   bool
}

func closedAt(gen uint64) want { return want{Generation: gen} }

func openAt(gen uint64, cooldown, ttl time.Duration) want {
	return want{Generation: gen, Open: true, Cooldown: cooldown, TTL: ttl}
}

func (w want) disabled() want { w.Disabled = true; return w }

func (w want) match(st breaker.State) bool {
	left := st.CooldownLeft == 0
	if w.TTL > 0 {
		left = st.CooldownLeft > w.TTL-leftSlack && st.CooldownLeft <= w.TTL
	}
	return st.Generation == w.Generation && st.Open == w.Open && st.Cooldown == w.Cooldown &&
		st.Disabled == w.Disabled && left
}

func (w want) String() string {
	s := "{Generation:" + strconv.FormatUint(w.Generation, 10) + " Open:" + strconv.FormatBool(w.Open) +
		" Cooldown:" + w.Cooldown.String()
	if w.TTL > 0 {
		s += " CooldownLeft:(" + (w.TTL - leftSlack).String() + "," + w.TTL.String() + "]"
	} else {
		s += " CooldownLeft:0"
	}
	return s + " Disabled:" + strconv.FormatBool(w.Disabled) + "}"
}

// check fails the test unless st matches w.
func (e *env) check(what string, st breaker.State, w want) {
	e.t.Helper()
	if !w.match(st) {
		e.t.Fatalf("%s: state %+v, want %v", what, st, w)
	}
}

// checkRead reads key and checks it against w.
func (e *env) checkRead(what, key string, w want) {
	e.t.Helper()
	e.check(what+", then Read", e.read(key), w)
}

// checkOK fails the test unless a transition's ok is want.
func (e *env) checkOK(what string, ok, want bool) {
	e.t.Helper()
	if ok != want {
		e.t.Fatalf("%s: ok = %v, want %v", what, ok, want)
	}
}
