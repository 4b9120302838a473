package fleet

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
)

// Failover under Redis Sentinel: a master, its replica and three real
// redis-sentinel processes; the master is killed (SIGKILL) while the
// fleet trips or probes a backend, the Sentinels promote the replica, and
// every instance follows them there (failover_test.go's guarantees).

// sentinelRedis is a Sentinel set as a failover fleet uses it.
type sentinelRedis struct {
	set     *testnet.SentinelSet
	current atomic.Pointer[testnet.Redis] // the master now
}

func startSentinel(t *testing.T, replicaOf func(master *testnet.Redis) string) *sentinelRedis {
	t.Helper()
	s := &sentinelRedis{set: testnet.StartSentinelSet(t, "l4lb", replicaOf)}
	s.current.Store(s.set.Master)
	return s
}

func (s *sentinelRedis) config(c *Config) {
	addrs := s.set.SentinelAddrs()
	c.RedisURL, c.SentinelMaster, c.SentinelAddrs = "redis://"+addrs[0], s.set.Name, addrs[1:]
}

func (s *sentinelRedis) holder(string) *testnet.Redis { return s.current.Load() }

// startSentinelLinked is startSentinel with the replica replicating
// through a proxy the test can stall.
func startSentinelLinked(t *testing.T) (*sentinelRedis, *cutProxy) {
	t.Helper()
	var link *cutProxy
	ha := startSentinel(t, func(m *testnet.Redis) string {
		link = startProxy(t, m.Addr)
		return link.addr
	})
	return ha, link
}

// failover kills the master and waits until the Sentinels have promoted
// the replica.
func (s *sentinelRedis) failover(t *testing.T) {
	t.Helper()
	killed := time.Now()
	s.set.Master.Kill()
	s.set.WaitPromoted(t)
	s.current.Store(s.set.Replica)
	t.Logf("the sentinels promoted the replica %v after the kill", time.Since(killed).Round(time.Millisecond))
}

// The master dies with A's trip in flight.
func TestSentinelFailoverMidTrip(t *testing.T) {
	ha := startSentinel(t, nil)
	f := newFailoverFleet(t, ha, "web/10.0.4.1:80", trips(1, time.Minute, time.Minute), nil)
	start := time.Now()
	pre := f.failoverTrip(t, func() { ha.set.Master.Kill() })
	ha.failover(t)
	raw := f.converged(t, "after the failover")
	t.Logf("converged %v after the kill: %+v", time.Since(start).Round(time.Millisecond), raw)
	f.check(t, pre, raw)
}

// The replica has stopped receiving the master's writes (its link
// stalled) when A trips: the trip reached A's snapshot and the master, not
// the replica, which still has the fleet's marker. After the failover no
// marker says Redis lost anything, yet Redis is behind A's copy: A writes
// its trip back (the generation raised above both), and every instance
// follows.
func TestSentinelFailoverToALaggingReplica(t *testing.T) {
	ha, link := startSentinelLinked(t)
	f := newFailoverFleet(t, ha, "web/10.0.4.2:80", trips(1, time.Minute, time.Minute), nil)
	pre := f.ins[1].b.Begin(breaker.KindClient)
	link.Stall()
	g := tripOn(t, f.ins[0]).Generation
	if raw, err := rawOf(ha.set.Replica, f.key); err != nil || raw.Gen != 0 {
		t.Fatalf("the replica holds %+v (%v) with its link stalled, want nothing", raw, err)
	}
	ha.failover(t)
	raw := f.convergedAbove(t, "after the failover to a replica without the trip", g)
	// By whichever instance read the key first: each had A's trip.
	f.mergedSome(t)
	f.check(t, pre, raw)
}

// The replica lost everything (FLUSHALL on it) before the master dies:
// the fleet's marker is gone too, and every instance writes its copy back.
func TestSentinelFailoverToAnEmptiedReplica(t *testing.T) {
	ha := startSentinel(t, nil)
	f := newFailoverFleet(t, ha, "web/10.0.4.3:80", trips(1, time.Minute, time.Minute), nil)
	pre, g := f.tripSeen(t)
	emptyReplica(t, ha.set.Master, ha.set.Replica)
	ha.failover(t)
	raw := f.convergedAbove(t, "after the failover to an emptied replica", g)
	if v, err := ha.set.Replica.Do("EXISTS", testPrefix+"fleet"); err != nil || v != "1" {
		t.Fatalf("the fleet marker on the new master: %q %v", v, err)
	}
	f.check(t, pre, raw)
}

// The master dies while an instance probes, holding the probe lock: no
// other instance probes at that generation, during the failover or after
// it, and probes go on one per cooldown on the new master.
func TestSentinelFailoverMidProbe(t *testing.T) {
	ha := startSentinel(t, nil)
	var killed atomic.Bool
	f := newFailoverFleet(t, ha, "web/10.0.4.4:80", trips(1, time.Second, time.Second), func(string) {
		if killed.CompareAndSwap(false, true) {
			// The first probe holds the lock through the kill and the
			// failover.
			ha.set.Master.Kill()
			testnet.WaitUntil(20*time.Second, func() bool { return ha.set.MasterAddr() == ha.set.Replica.Addr })
		}
	})
	pre := f.ins[1].b.Begin(breaker.KindClient)
	tripOn(t, f.ins[0])
	testnet.Eventually(t, "the first probe", killed.Load)
	ha.failover(t)
	testnet.Eventually(t, "three probes under the lock after the failover", func() bool { return f.probes.fleetWide() >= 4 })
	raw := f.converged(t, "after the probes")
	f.check(t, pre, raw)
}

// The probe lock reaches the replica before the probe starts (WAIT 1 after
// the SET), so a failover cannot hand it to a second prober; with the
// replica's link stalled the wait ends after its bound and the probe goes
// on, the lock holding on the master.
func TestProbeLockWaitsForTheReplica(t *testing.T) {
	ha, link := startSentinelLinked(t)
	h := newBareFleet(t)
	s := h.store(func(c *Config) { ha.config(c); c.Timeout = failoverTimeout }, Options{})
	ctx := h.ctx
	ks := keyspace{prefix: testPrefix}
	if got, err := s.AcquireProbe(ctx, "web/10.0.4.5:80", "A", time.Minute); err != nil || !got {
		t.Fatalf("A takes the probe lock: %v %v", got, err)
	}
	if v, err := ha.set.Replica.Do("GET", ks.key("web/10.0.4.5:80", fieldProbe)); err != nil || v != "A" {
		t.Fatalf("the replica holds %q (%v) for the lock A was just given, want A's token", v, err)
	}

	link.Stall()
	start := time.Now()
	if got, err := s.AcquireProbe(ctx, "web/10.0.4.6:80", "A", time.Minute); err != nil || !got {
		t.Fatalf("A takes a probe lock with the replica's link stalled: %v %v", got, err)
	}
	if took := time.Since(start); took < failoverTimeout/2 {
		t.Fatalf("the lock was given in %v with the replica's link stalled: no wait for the replica (bound %v)", took, failoverTimeout/2)
	}
	if !s.Up() {
		t.Fatal("the store left Redis over a replica that did not answer")
	}
}
