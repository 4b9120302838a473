package fleet

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/breaker/storetest"
)

// Failover on a Redis Cluster: three masters with a replica each, real
// redis-server nodes (cluster-node-timeout 1 s). The master of the slot
// holding the tripped backend's keys is killed mid-trip and mid-probe, its
// replica takes the slot over, and every instance follows
// (failover_test.go's guarantees). Each backend's keys share one slot
// (keys.go's hash tag), so every script touches one node.

// clusterRedis is a Redis Cluster as a failover fleet uses it.
type clusterRedis struct{ c *testnet.RedisCluster }

func startCluster(t *testing.T) *clusterRedis {
	t.Helper()
	return &clusterRedis{c: testnet.StartRedisCluster(t, 3)}
}

// config gives every node: redis_url names one, redis_addrs the others.
func (c *clusterRedis) config(cfg *Config) {
	addrs := c.c.Addrs()
	cfg.RedisURL, cfg.RedisAddrs = "redis://"+addrs[0], addrs[1:]
}

func (c *clusterRedis) holder(key string) *testnet.Redis {
	m, _ := c.c.MasterOf(keyspace{prefix: testPrefix}.key(key, fieldGen))
	return m
}

// slotOf is the master and replica of key's slot, before a failover.
func (c *clusterRedis) slotOf(t *testing.T, key string) (master, replica *testnet.Redis) {
	t.Helper()
	master, replica = c.c.MasterOf(keyspace{prefix: testPrefix}.key(key, fieldGen))
	if replica == nil {
		t.Fatalf("the master %s of %s's slot has no replica", master.Addr, key)
	}
	return master, replica
}

// failover kills master and waits until replica serves key's slot.
func (c *clusterRedis) failover(t *testing.T, master, replica *testnet.Redis, key string) {
	t.Helper()
	killed := time.Now()
	master.Kill()
	c.c.WaitPromoted(replica, master, keyspace{prefix: testPrefix}.key(key, fieldGen))
	t.Logf("%s took the slot of %s over %v after the kill", replica.Addr, key, time.Since(killed).Round(time.Millisecond))
}

// clusterKey is a breaker key whose slot is not served by the master of
// the fleet's marker: a loss there is one no marker check sees.
func clusterKey(t *testing.T, c *clusterRedis, base string) string {
	t.Helper()
	marker, _ := c.c.MasterOf(testPrefix + "fleet")
	for i := range 64 {
		key := base + itoa(uint64(i))
		if m, _ := c.slotOf(t, key); m != marker {
			return key
		}
	}
	t.Fatalf("every key %s* lands on the marker's master", base)
	return ""
}

// The master of the tripped backend's slot dies with A's trip in flight.
func TestClusterFailoverMidTrip(t *testing.T) {
	ha := startCluster(t)
	key := clusterKey(t, ha, "web/10.0.6.1:")
	m, r := ha.slotOf(t, key)
	f := newFailoverFleet(t, ha, key, trips(1, time.Minute, time.Minute), nil)
	pre := f.failoverTrip(t, m.Kill)
	ha.failover(t, m, r, key)
	raw := f.converged(t, "after the failover")
	t.Logf("converged: %+v", raw)
	f.check(t, pre, raw)
}

// The replica of the tripped backend's slot lost everything (FLUSHALL on
// it) before its master dies. The fleet's marker is on another master and
// says nothing; the instances' copies, ahead of the new master, are
// written back.
func TestClusterFailoverToAnEmptiedReplica(t *testing.T) {
	ha := startCluster(t)
	key := clusterKey(t, ha, "web/10.0.6.2:")
	m, r := ha.slotOf(t, key)
	f := newFailoverFleet(t, ha, key, trips(1, time.Minute, time.Minute), nil)
	pre, g := f.tripSeen(t)
	emptyReplica(t, m, r)
	ha.failover(t, m, r, key)
	raw := f.convergedAbove(t, "after the failover to an emptied replica", g)
	f.mergedSome(t)
	f.check(t, pre, raw)
}

// The master of the backend's slot dies while an instance probes it,
// holding the probe lock.
func TestClusterFailoverMidProbe(t *testing.T) {
	ha := startCluster(t)
	key := clusterKey(t, ha, "web/10.0.6.3:")
	m, r := ha.slotOf(t, key)
	var killed atomic.Bool
	f := newFailoverFleet(t, ha, key, trips(1, time.Second, time.Second), func(string) {
		if killed.CompareAndSwap(false, true) {
			m.Kill()
			testnet.WaitUntil(20*time.Second, func() bool {
				role, err := r.Do("ROLE")
				return err == nil && strings.HasPrefix(role, "master\n")
			})
		}
	})
	pre := f.ins[1].b.Begin(breaker.KindClient)
	tripOn(t, f.ins[0])
	testnet.Eventually(t, "the first probe", killed.Load)
	ha.failover(t, m, r, key)
	testnet.Eventually(t, "three probes under the lock after the failover", func() bool { return f.probes.fleetWide() >= 4 })
	raw := f.converged(t, "after the probes")
	f.check(t, pre, raw)
}

// Invalidation on a cluster, before and after a failover: a trip on A
// reaches B, whose breaker and Store would otherwise not look for an
// hour, through the server's invalidation alone, whichever node serves
// the key. After the failover the key's slot is on a node B's client had
// no tracking on before: the read path must track there too (with
// broadcast-mode tracking, subscribe on every master, the promoted ones
// included).
func TestClusterTripReachesAnotherByInvalidationAcrossAFailover(t *testing.T) {
	ha := startCluster(t)
	const base = "web/10.0.6.4:"
	key := clusterKey(t, ha, base)
	m, r := ha.slotOf(t, key)
	hourly := func(o *breaker.Options) { o.SnapshotRefresh = time.Hour }
	cfg := trips(1, time.Minute, time.Minute)
	h := newBareFleet(t)
	store := func() *Store {
		return h.store(func(c *Config) { ha.config(c); c.Timeout = failoverTimeout }, Options{})
	}
	sa, sb := store(), store()
	// One backend per master: a trip on each must reach B.
	var keys []string
	seen := map[*testnet.Redis]bool{}
	for i := 0; len(keys) < 3 && i < 256; i++ {
		k := base + "x" + itoa(uint64(i))
		if km, _ := ha.slotOf(t, k); !seen[km] {
			seen[km] = true
			keys = append(keys, k)
		}
	}
	keys = append(keys, key)
	tripAll := func(what string, keys []string) {
		t.Helper()
		for _, k := range keys {
			a := h.instance("A", sa, k, cfg, hourly)
			b := h.instance("B", sb, k, cfg, hourly)
			h.start(nil, a)
			h.start(nil, b)
			waitState(t, b, what+": starts closed", func(st breaker.State) bool { return !st.Open })
			// After a failover a client's first command to the moved
			// slot may find its old master gone (the layout is re-read
			// then) and the Store apart until its rejoin; B's tracking
			// of the key on its new node starts with a read while up.
			testnet.Eventually(t, what+": B reads "+k+" with the fleet", func() bool {
				if !sa.Up() || !sb.Up() {
					return false
				}
				err := b.b.Refresh(h.ctx)
				return err == nil && sb.Up()
			})
			before := sb.Invalidations()
			g := tripOn(t, a).Generation
			t.Logf("%s: A tripped %s at generation %d, its store up: %v", what, k, g, sa.Up())
			// At g, or above if A's client found the moved slot's old
			// master gone and A tripped apart, then merged it.
			waitState(t, b, what+": told of A's trip of "+k, func(st breaker.State) bool { return st.Open && st.Generation >= g })
			if sb.Invalidations() <= before {
				t.Fatalf("%s: B learnt of the trip of %s without an invalidation", what, k)
			}
		}
	}
	tripAll("before the failover", keys[:len(keys)-1])
	ha.failover(t, m, r, key)
	testnet.Eventually(t, "both stores back", func() bool { return sa.Up() && sb.Up() })
	// key, never read before, and another key of the promoted node's.
	after := []string{key}
	for i := 0; len(after) < 2 && i < 256; i++ {
		if k := base + "y" + itoa(uint64(i)); ha.holder(k) == r {
			after = append(after, k)
		}
	}
	tripAll("after the failover", after)
}

// Every script and command of the Store on a cluster: the breaker Store
// contract (trip, close, re-open, the probe lock, disables, reads of open
// and closed breakers) and the API-added backends' documents, written on
// one instance and heard of by another through an invalidation. A script
// touching keys of two slots would fail here with CROSSSLOT.
func TestStoreOnACluster(t *testing.T) {
	ha := startCluster(t)
	h := newBareFleet(t)
	store := func() *Store { return h.store(ha.config, Options{}) }
	s := store()
	t.Run("contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			return storetest.Harness{Store: s, Elapse: time.Sleep}
		})
	})
	t.Run("members", func(t *testing.T) {
		b := store()
		wb, _ := watchMembers(t, b)
		if got := members(t, b, "web"); got != "" {
			t.Fatalf("B reads %q before any write", got)
		}
		put(t, s, "web", docOne)
		wb.told(t, "B", "web", 1, docOne)
		put(t, s, "api", docTwo)
		wb.told(t, "B", "api", 1, docTwo)
		if pools, err := b.MemberPools(h.ctx); err != nil || !slices.Equal(pools, []string{"api", "web"}) {
			t.Fatalf("B's pools: %v %v", pools, err)
		}
	})
	if !s.Up() {
		t.Fatal("the store left the cluster")
	}
	// The marker script, on whichever master serves its slot.
	if v, err := ha.c.Do(testPrefix+"fleet", "EXISTS", testPrefix+"fleet"); err != nil || v != "1" {
		t.Fatalf("fleet marker: %q %v", v, err)
	}
}
