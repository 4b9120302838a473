package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
)

// The behaviour tests run a small fleet in one process: every instance is a
// Store of its own (its own rueidis client, its own local copy) on one
// redis-server, with a breaker of its own for the same key, each with its
// Run goroutines as the l4lb process runs them.

// relaxedTimeout is the Store timeout (and the breakers' StoreTimeout) of
// tests that are not about timeouts: long enough that a loaded machine
// never makes a Store give Redis up and decide locally, which would change
// what those tests watch.
const relaxedTimeout = 5 * time.Second

// testPrefix is the key prefix of the tests' Stores: l4lb's default.
var testPrefix = config.DefaultCluster().KeyPrefix

// defaultBreaker is [pool.NAME.breaker] at l4lb's defaults.
var defaultBreaker = config.DefaultBreaker()

// trips is a breaker that trips on failures failed dials within l4lb's
// default window and is probed after cooldown, doubling up to
// maxCooldown; l4lb's default number of successes closes it.
func trips(failures int, cooldown, maxCooldown time.Duration) breaker.Config {
	return breaker.Config{Failures: failures, Window: defaultBreaker.Window, Cooldown: cooldown, MaxCooldown: maxCooldown, Successes: defaultBreaker.Successes}
}

// fleetHarness owns the redis-server and every goroutine a test starts;
// they are stopped (context canceled) and waited for when the test ends,
// before the server is killed and the leak check runs.
type fleetHarness struct {
	t      *testing.T
	srv    *testnet.Redis
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newFleet(t *testing.T) *fleetHarness {
	t.Helper()
	h := &fleetHarness{t: t, srv: testnet.StartRedis(t)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	t.Cleanup(h.stop)
	return h
}

func (h *fleetHarness) stop() {
	h.cancel()
	h.wg.Wait()
}

// goRun runs f(ctx) on a goroutine of its own and returns a function
// that waits for it to return. Cancel ctx (or end the test) to stop it.
func (h *fleetHarness) goRun(ctx context.Context, f func(context.Context)) (wait func()) {
	done := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(done)
		f(ctx)
	}()
	return func() { <-done }
}

// store is an instance's Store on the harness's server (tweak may point it
// elsewhere, a proxy), with its Run started. Its client is closed when Run
// returns.
func (h *fleetHarness) store(tweak func(*Config), opts Options) *Store {
	h.t.Helper()
	cfg := Config{KeyPrefix: testPrefix, SyncInterval: time.Hour, Timeout: relaxedTimeout}
	if h.srv != nil {
		cfg.RedisURL = h.srv.URL()
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.goRun(h.ctx, s.Run)
	// New tries Redis once, for about the timeout; on a loaded machine
	// that can be too short, and Run keeps trying.
	rejoined(h.t, s, "store joins redis")
	return s
}

// checker is a Store that only reads, for assertions; no Run.
func (h *fleetHarness) checker() *Store {
	h.t.Helper()
	s, err := New(Config{RedisURL: h.srv.URL(), KeyPrefix: testPrefix, SyncInterval: time.Hour, Timeout: relaxedTimeout}, Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(s.Shutdown)
	return s
}

// instance is one l4lb process's view of a backend: its Store, its breaker
// and what the breaker's events said.
type instance struct {
	name  string
	store *Store
	b     *breaker.Breaker
	ev    *recorder
}

// instance builds a breaker for key on s (Async, as the process runs it).
// It does not start the breaker's Run: call start.
func (h *fleetHarness) instance(name string, s *Store, key string, cfg breaker.Config, tweak func(*breaker.Options)) *instance {
	h.t.Helper()
	in := &instance{name: name, store: s, ev: newRecorder()}
	opts := breaker.Options{Async: true, Events: in.ev.events(), StoreTimeout: relaxedTimeout}
	if tweak != nil {
		tweak(&opts)
	}
	b, err := breaker.New(key, cfg, s, opts)
	if err != nil {
		h.t.Fatalf("%s: breaker.New: %v", name, err)
	}
	in.b = b
	return in
}

// start runs the breaker until ctx is done (nil: the end of the test).
func (h *fleetHarness) start(ctx context.Context, in *instance) (wait func()) {
	if ctx == nil {
		ctx = h.ctx
	}
	return h.goRun(ctx, in.b.Run)
}

// tripOn fails client dials on in until its snapshot is open.
func tripOn(t *testing.T, in *instance) breaker.State {
	t.Helper()
	testnet.Eventually(t, in.name+" trips", func() bool {
		if in.b.State().Open {
			return true
		}
		in.b.Done(in.b.Begin(breaker.KindClient), breaker.Failure)
		return in.b.State().Open
	})
	return in.b.State()
}

// waitState polls in's snapshot until want holds.
func waitState(t *testing.T, in *instance, what string, want func(breaker.State) bool) breaker.State {
	t.Helper()
	testnet.Eventually(t, in.name+": "+what, func() bool { return want(in.b.State()) })
	return in.b.State()
}

func isOpenAt(gen uint64) func(breaker.State) bool {
	return func(st breaker.State) bool { return st.Open && st.Generation == gen }
}

func isClosedAt(gen uint64) func(breaker.State) bool {
	return func(st breaker.State) bool { return !st.Open && st.Generation == gen }
}

// rawState is what the server holds for a breaker key, read key by key
// with the harness's own connection (no client-side cache, no script).
type rawState struct {
	Gen      uint64
	Open     bool
	OpenGen  uint64 // the generation in the open entry
	Disabled bool
}

func (h *fleetHarness) raw(key string) rawState {
	h.t.Helper()
	st, err := rawOf(h.srv, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// waitWrittenBack waits until the server holds key open again, after a
// loss, and fails the test unless it is open above generation g (the
// one before the loss): written back by the reconcile rule.
func (h *fleetHarness) waitWrittenBack(what, key string, g uint64) rawState {
	h.t.Helper()
	var raw rawState
	testnet.Eventually(h.t, what, func() bool {
		raw = h.raw(key)
		return raw.Open
	})
	if raw.Gen <= g || raw.OpenGen != raw.Gen {
		h.t.Fatalf("redis holds %+v for %s after it was written back, want open above generation %d", raw, key, g)
	}
	return raw
}

// rawOf is what srv holds for a breaker key; an error when srv does not
// answer, or answers what no Store writes.
func rawOf(srv *testnet.Redis, key string) (rawState, error) {
	ks := keyspace{prefix: testPrefix}
	// One MGET: the fields of one moment, not of a merge half done.
	v, err := srv.Do("MGET", ks.key(key, fieldGen), ks.key(key, fieldOpen), ks.key(key, fieldDisabled))
	if err != nil {
		return rawState{}, fmt.Errorf("MGET %s: %w", key, err)
	}
	vals := strings.Split(v, "\n")
	if len(vals) != 3 {
		return rawState{}, fmt.Errorf("MGET %s answered %q", key, v)
	}
	var st rawState
	if g := vals[0]; g != "(nil)" {
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil {
			return st, fmt.Errorf("generation %q: %w", g, err)
		}
		st.Gen = n
	}
	if o := vals[1]; o != "(nil)" {
		st.Open = true
		g, _, _ := strings.Cut(o, " ")
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil {
			return st, fmt.Errorf("open entry %q: %w", o, err)
		}
		st.OpenGen = n
	}
	st.Disabled = vals[2] != "(nil)"
	return st, nil
}

// recorder counts a breaker's events.
type recorder struct {
	mu     sync.Mutex
	counts map[string]int
	tripAt atomic.Int64 // unix nanoseconds of the last Trip event
}

func newRecorder() *recorder { return &recorder{counts: map[string]int{}} }

func (r *recorder) inc(name string) {
	r.mu.Lock()
	r.counts[name]++
	r.mu.Unlock()
}

func (r *recorder) events() breaker.Events {
	return breaker.Events{
		Trip: func(string, breaker.State) {
			r.tripAt.Store(time.Now().UnixNano())
			r.inc("trip")
		},
		Close:        func(string, breaker.State) { r.inc("close") },
		Reopen:       func(string, breaker.State) { r.inc("reopen") },
		ProbeFailure: func(string) { r.inc("probe_failure") },
		Stale:        func(string) { r.inc("stale") },
		Dropped:      func(string) { r.inc("dropped") },
	}
}

func (r *recorder) n(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

// opCounter is an Options.Observe that counts a Store's Redis operations
// by name, failed ones apart.
type opCounter struct {
	mu     sync.Mutex
	ok     map[string]int
	failed map[string]int
}

func newOpCounter() *opCounter {
	return &opCounter{ok: map[string]int{}, failed: map[string]int{}}
}

func (c *opCounter) observe(op string, _ time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed[op]++
	} else {
		c.ok[op]++
	}
}

// n is how many op calls Redis answered.
func (c *opCounter) n(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok[op]
}
