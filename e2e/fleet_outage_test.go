package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Redis dies under load and comes back empty, with two real l4lb
// instances sharing breaker state through it ([cluster] store = "redis").
// Clients never notice: the data path reads breaker snapshots and never
// waits on the store. Both instances say they decide alone
// (l4lb_cluster_store_up 0 and the warn line); a backend that stops while
// they are apart trips instance A's breaker on A's local copy; when Redis
// is back, empty, A writes that breaker back by the reconcile rule (open
// wins, the generation raised above both sides), and the fleet goes on
// from there.
func TestFleetRedisOutageUnderLoad(t *testing.T) {
	testnet.CheckLeaks(t)
	srv := testnet.StartRedis(t)
	b1 := startFleetEcho(t, "b1")
	b2 := startFleetEcho(t, "b2")
	dir := t.TempDir()
	backendsList := []string{b1.addr, b2.addr}
	// retries: a refused dial is retried on the other backend, so a client
	// never sees b2's stop. A cooldown of a minute keeps b2's breaker open
	// through the rest of the test: what Redis gets back is an open entry.
	a := startFleetInstance(t, "", nil, dir, srv.URL(), "fleet-a", backendsList, fleetRetryKeys, fleetMinuteOpenKeys)
	b := startFleetInstance(t, "", nil, dir, srv.URL(), "fleet-b", backendsList, fleetRetryKeys, fleetMinuteOpenKeys)
	openB2, genB2 := fleetSeries("l4lb_breaker_open", b2.addr), fleetSeries("l4lb_breaker_generation", b2.addr)
	for _, in := range []*fleetInstance{a, b} {
		if v := in.mustMetric(t, openB2); v != 0 {
			t.Fatalf("instance %s starts with b2's breaker open", in.name)
		}
	}

	// Two clients per instance, each at most 1500 connections and 25 s.
	load := startFleetLoad([]string{a.listen, b.listen}, 2, 1500, 25*time.Second, 15*time.Millisecond)
	defer load.end()
	start := time.Now()
	progress := func(what string, n int64) {
		t.Helper()
		load.progress(t, what, n, a.listen, b.listen)
	}
	progress("clients through both instances", 20)

	// Redis dies.
	srv.Kill()
	killed := time.Now()
	for _, in := range []*fleetInstance{a, b} {
		in.waitMetric(t, "l4lb_cluster_store_up", "to see Redis gone", func(v float64) bool { return v == 0 })
	}
	downSeen := time.Since(killed)
	for _, in := range []*fleetInstance{a, b} {
		testnet.Eventually(t, "instance "+in.name+"'s warn line", func() bool {
			return strings.Contains(in.p.stderr.String(), "cluster store unreachable")
		})
		if !strings.Contains(in.p.stderr.String(), "level=WARN msg=\"cluster store unreachable") {
			t.Errorf("instance %s: the unreachable line is not a warning:\n%s", in.name, fleetTail(in.p.stderr.String(), 20))
		}
	}
	progress("clients while Redis is down", 20)

	// b2 stops accepting while the instances are apart: A (and B, whose
	// clients dial it too) trips it on its local copy.
	stopped := time.Now()
	b2.unlisten()
	stoppedEnd := time.Now()
	a.waitMetric(t, openB2, "to trip b2 alone", func(v float64) bool { return v == 1 })
	tripGen := a.mustMetric(t, genB2)
	tripped := time.Since(stopped)
	if tripGen < 1 {
		t.Fatalf("A's local generation of b2 after its trip: %v", tripGen)
	}
	if !strings.Contains(a.p.stderr.String(), "breaker decided locally, to be merged back") {
		t.Errorf("A's trip was not logged as decided locally")
	}
	if _, err := srv.Do("PING"); err == nil {
		t.Fatal("Redis answers while it should be down")
	}
	progress("clients while b2 is down and Redis too", 20)

	// b2 comes back; then Redis, empty.
	if err := b2.listen(); err != nil {
		t.Fatalf("b2 listening again on %s: %v", b2.addr, err)
	}
	srv.Restart()
	restarted := time.Now()
	for _, in := range []*fleetInstance{a, b} {
		in.waitMetric(t, "l4lb_cluster_store_up", "to rejoin Redis", func(v float64) bool { return v == 1 })
	}
	upSeen := time.Since(restarted)
	a.waitMetric(t, "l4lb_cluster_reconciled_keys_total", "to have merged keys back", func(v float64) bool { return v >= 1 })

	// Redis holds b2's breaker as the merge wrote it: open, at a
	// generation above what A decided alone.
	gen, open := fleetRedisGen(t, srv, b2.addr)
	g, err := strconv.ParseUint(gen, 10, 64)
	if err != nil || float64(g) <= tripGen {
		t.Fatalf("Redis %s = %q after the merge; want a generation above A's local %v", fleetKey(b2.addr, "gen"), gen, tripGen)
	}
	if open == "(nil)" || !strings.HasPrefix(open, gen+" ") {
		t.Fatalf("Redis %s = %q after the merge; want open at generation %s (open wins)", fleetKey(b2.addr, "open"), open, gen)
	}
	if !strings.Contains(a.p.stderr.String(), "cluster store: merged a breaker state") ||
		!strings.Contains(a.p.stderr.String(), "key=p/"+b2.addr) {
		t.Errorf("A did not log merging b2's breaker back")
	}
	// Both instances follow Redis: b2 open at its generation.
	for _, in := range []*fleetInstance{a, b} {
		in.waitOpenAtRedis(t, srv, b2.addr)
	}
	progress("clients after Redis is back", 30)
	load.end()
	total := time.Since(start)

	// Not one client failed, from the first to the last, except a
	// connection b2's stop itself may reset.
	excused := load.noneFailed(t, stopped, stoppedEnd, total)
	logNotable(t, a, b)
	t.Logf("%d client connections, none failed (%d excused); store_up 0 on both %v after the kill; A tripped b2 alone %v after its stop (local generation %v); store_up 1 on both %v after the restart; Redis then holds b2 open at generation %s (%q); whole run %v",
		load.ok.Load(), excused, downSeen.Round(time.Millisecond), tripped.Round(time.Millisecond), tripGen, upSeen.Round(time.Millisecond), gen, open, total.Round(time.Millisecond))
}
