package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Redis fails over under client load, with two real l4lb instances
// sharing breaker state through it: the master dies (SIGKILL) just as
// backend b2 stops, so the trips it causes are in flight while Redis has
// no master; the Sentinels (or the cluster) promote the replica. Clients
// never notice, and afterwards both instances and the new master agree:
// b2 open at one generation.

// failoverRedis is a Redis that fails over, as these tests drive it.
type failoverRedis struct {
	// edit adds the [cluster] keys that point an instance at it.
	edit func(string) string
	url  string
	// kill kills the master holding b2's keys; promoted waits until its
	// replica took over; holder is the server holding b2's keys after it.
	kill     func()
	promoted func()
	holder   func() *testnet.Redis
}

func TestFleetSentinelFailoverUnderLoad(t *testing.T) {
	testnet.CheckLeaks(t)
	set := testnet.StartSentinelSet(t, "l4lb", nil)
	addrs := set.SentinelAddrs()
	fleetFailoverUnderLoad(t, func(string) *failoverRedis {
		return &failoverRedis{
			url: "redis://" + addrs[0],
			edit: func(text string) string {
				return strings.Replace(text, "[cluster]\n", fmt.Sprintf("[cluster]\nsentinel_master = %q\nsentinel_addrs = [%q, %q]\n", set.Name, addrs[1], addrs[2]), 1)
			},
			kill:     set.Master.Kill,
			promoted: func() { set.WaitPromoted(t) },
			holder:   func() *testnet.Redis { return set.Replica },
		}
	})
}

// On a cluster the instances are given every node: redis_url one,
// redis_addrs the others.
func TestFleetClusterFailoverUnderLoad(t *testing.T) {
	testnet.CheckLeaks(t)
	c := testnet.StartRedisCluster(t, 3)
	addrs := c.Addrs()
	fleetFailoverUnderLoad(t, func(b2 string) *failoverRedis {
		key := fleetKey(b2, "gen")
		m, r := c.MasterOf(key)
		quoted := make([]string, 0, len(addrs)-1)
		for _, a := range addrs[1:] {
			quoted = append(quoted, strconv.Quote(a))
		}
		return &failoverRedis{
			url: "redis://" + addrs[0],
			edit: func(text string) string {
				return strings.Replace(text, "[cluster]\n", "[cluster]\nredis_addrs = ["+strings.Join(quoted, ", ")+"]\n", 1)
			},
			kill:     m.Kill,
			promoted: func() { c.WaitPromoted(r, m, key) },
			holder:   func() *testnet.Redis { return r },
		}
	})
}

// fleetFailoverUnderLoad runs the test on the Redis ha makes for b2's
// address.
func fleetFailoverUnderLoad(t *testing.T, ha func(b2 string) *failoverRedis) {
	b1 := startFleetEcho(t, "b1")
	b2 := startFleetEcho(t, "b2")
	r := ha(b2.addr)
	dir := t.TempDir()
	backends := []string{b1.addr, b2.addr}
	// As in TestFleetRedisOutageUnderLoad: a refused dial is retried on
	// the other backend, and b2's breaker stays open to the end.
	a := startFleetInstanceEdited(t, "", nil, dir, r.url, "fleet-a", backends, fleetRetryKeys, fleetMinuteOpenKeys, r.edit)
	b := startFleetInstanceEdited(t, "", nil, dir, r.url, "fleet-b", backends, fleetRetryKeys, fleetMinuteOpenKeys, r.edit)

	load := startFleetLoad([]string{a.listen, b.listen}, 2, 1500, 25*time.Second, 15*time.Millisecond)
	defer load.end()
	start := time.Now()
	load.progress(t, "clients through both instances", 20, a.listen, b.listen)

	// b2 stops and the master dies at once: the trips are in flight.
	stopped := time.Now()
	b2.unlisten()
	stoppedEnd := time.Now()
	r.kill()
	r.promoted()
	promoted := time.Since(stopped)
	load.progress(t, "clients after the failover", 20, a.listen, b.listen)

	// Both instances with the fleet again, agreeing with the new master.
	var gen, open string
	for _, in := range []*fleetInstance{a, b} {
		in.waitMetric(t, "l4lb_cluster_store_up", "to be with the fleet again", func(v float64) bool { return v == 1 })
		gen, open = in.waitOpenAtRedis(t, r.holder(), b2.addr)
	}
	converged := time.Since(stopped)
	load.progress(t, "clients after the instances agree", 30, a.listen, b.listen)
	load.end()
	total := time.Since(start)

	excused := load.noneFailed(t, stopped, stoppedEnd, total)
	logNotable(t, a, b)
	t.Logf("%d client connections, none failed (%d excused); replica promoted %v after b2's stop and the kill; both instances open at the new master's generation %s (%q) %v after; whole run %v",
		load.ok.Load(), excused, promoted.Round(time.Millisecond), gen, open, converged.Round(time.Millisecond), total.Round(time.Millisecond))
}
