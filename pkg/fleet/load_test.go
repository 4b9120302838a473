package fleet

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// The Store's load on Redis follows changes, not the number of keys or how
// often breakers read: broadcast tracking keeps cached reads good until a
// write, an open breaker's answer is kept until its cooldown runs out, and
// a reconnect makes every key be read again once.

// calls is the server's INFO commandstats: calls by command name.
func (h *fleetHarness) calls() map[string]int {
	h.t.Helper()
	v, err := h.srv.Do("INFO", "commandstats")
	if err != nil {
		h.t.Fatalf("INFO commandstats: %v", err)
	}
	out := map[string]int{}
	for line := range strings.SplitSeq(v, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		out[name], _ = strconv.Atoi(n)
	}
	return out
}

// delta is what b counted more than a, by command.
func delta(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range b {
		if d := v - a[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// fastRefresh makes a breaker re-read its Store every 10 ms: two hundred
// reads in the two seconds a test watches, none of which may reach Redis.
func fastRefresh(o *breaker.Options) { o.SnapshotRefresh = 10 * time.Millisecond }

// keysOf are n breaker keys of one pool.
func keysOf(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("web/10.1.0.%d:80", i+1)
	}
	return keys
}

// idleFor waits d and returns what Redis was sent meanwhile.
func (h *fleetHarness) idleFor(d time.Duration) map[string]int {
	before := h.calls()
	time.Sleep(d)
	return delta(before, h.calls())
}

// Two instances × 20 closed breakers reading every 10 ms, with the Store
// checking Redis every 200 ms: no read reaches Redis (cached until a
// write), only the checks of the fleet's marker do. Before broadcast
// tracking each key went back to Redis every sync_interval.
func TestIdleFleetReadsNothingFromRedis(t *testing.T) {
	h := newFleet(t)
	check := func(c *Config) { c.SyncInterval = 200 * time.Millisecond }
	cfg := trips(defaultBreaker.Failures, defaultBreaker.Cooldown, defaultBreaker.MaxCooldown)
	for _, name := range []string{"A", "B"} {
		s := h.store(check, Options{})
		for _, key := range keysOf(20) {
			h.start(nil, h.instance(name, s, key, cfg, fastRefresh))
		}
	}
	time.Sleep(100 * time.Millisecond) // every breaker's first reads
	sent := h.idleFor(2 * time.Second)
	t.Logf("sent to Redis in 2 s of idle: %v", sent)
	checks := sent["evalsha"] + sent["eval"] // the marker script: one GET inside
	for cmd, n := range sent {
		switch {
		case cmd == "evalsha", cmd == "eval", cmd == "ping", cmd == "info": // the marker checks, rueidis' keep-alive, ours
		case cmd == "get" && n <= checks:
		default:
			t.Errorf("%d %s in 2 s of idle: a closed breaker's read reached Redis", n, cmd)
		}
	}
	if checks == 0 {
		t.Error("no marker check in 2 s at sync_interval 200ms: the test watched nothing")
	}
}

// An open breaker is read from Redis when it changes, not at every
// snapshot refresh: B, refreshing every 10 ms, reads A's trip once and
// then nothing while the cooldown runs, and a probe lock taken and given
// back meanwhile (by a third instance) wakes neither B's breaker nor a
// read.
func TestOpenBreakerIsNotReadAgainWhileItCoolsDown(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.1.1.1:80"
	cfg := trips(1, time.Minute, defaultBreaker.MaxCooldown)
	a := h.instance("A", h.store(nil, Options{}), key, cfg, fastRefresh)
	b := h.instance("B", h.store(nil, Options{}), key, cfg, fastRefresh)
	h.start(nil, a)
	h.start(nil, b)
	tripOn(t, a)
	waitState(t, b, "sees A's trip", isOpenAt(1))
	time.Sleep(100 * time.Millisecond) // the reads A's trip caused
	var woken atomic.Int64
	defer b.store.Watch(key, func() { woken.Add(1) })()

	c := h.checker()
	before := h.calls()
	if got, err := c.AcquireProbe(h.ctx, key, "someone", time.Minute); err != nil || !got {
		t.Fatalf("AcquireProbe: %v, %v", got, err)
	}
	if err := c.ReleaseProbe(h.ctx, key, "someone"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	sent := delta(before, h.calls())
	t.Logf("sent to Redis in 2 s of an open breaker cooling down: %v", sent)
	if n := sent["evalsha_ro"] + sent["eval_ro"] + sent["echo"]; n != 0 {
		t.Errorf("%d reads of the open breaker in 2 s (%v): it is read at every refresh", n, sent)
	}
	if n := woken.Load(); n != 0 {
		t.Errorf("B's watcher called %d times by a probe lock's set and release", n)
	}
	st := b.b.State()
	if !st.Open || st.CooldownLeft <= 0 || st.CooldownLeft > time.Minute-2*time.Second {
		t.Errorf("B's snapshot %+v: want open, its cooldown run down by the 2 s", st)
	}
}

// When the connection is lost, so is the server's tracking: every key is
// read again, once, on the new connection, which is tracked from then on.
// B's breakers refresh hourly, so only the Store can make them read: at
// the reconnect (the cache dropped) and at A's later trip (invalidated on
// the new connection).
func TestReconnectReadsEveryKeyOnceAndIsTrackedAgain(t *testing.T) {
	h := newFleet(t)
	keys := keysOf(10)
	hourly := func(o *breaker.Options) { o.SnapshotRefresh = time.Hour }
	cfg := trips(1, time.Minute, defaultBreaker.MaxCooldown)
	sa, sb := h.store(nil, Options{}), h.store(nil, Options{})
	var bs []*instance
	for _, key := range keys {
		h.start(nil, h.instance("A", sa, key, cfg, hourly))
		in := h.instance("B", sb, key, cfg, hourly)
		h.start(nil, in)
		bs = append(bs, in)
	}
	time.Sleep(100 * time.Millisecond)

	before := h.calls()
	if _, err := h.srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err)
	}
	// Each Store reads its 10 keys' three fields again, each a cache
	// miss (an ECHO beside its GET: rueidis' CLIENT CACHING stand-in).
	want := 3 * len(keys) * 2
	testnet.Eventually(t, "every key read again after the reconnect", func() bool {
		return delta(before, h.calls())["echo"] >= want
	})
	time.Sleep(500 * time.Millisecond)
	if n := delta(before, h.calls())["echo"]; n != want {
		t.Errorf("%d cache misses after the reconnect, want %d: each key once", n, want)
	}

	a := h.instance("A", sa, keys[0], cfg, hourly)
	h.start(nil, a)
	tripOn(t, a)
	waitState(t, bs[0], "sees A's trip after the reconnect", isOpenAt(1))
}
