package fleet

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// Redis loses a backend's keys but not the fleet's marker: what a failover
// to a replica the trip had not reached yet does (replication is
// asynchronous), and, on a Redis Cluster, the failover of any slot but the
// marker's. No marker check can tell; the instance whose copy is ahead of
// Redis sees it at its next read, writes the trip back above both
// generations, and every instance follows. The real failovers are in
// sentinel_test.go and cluster_test.go; here the loss is made by hand, on
// one server.
func TestRedisBehindTheLocalCopyIsCaughtUp(t *testing.T) {
	h := newFleet(t)
	const key = "web/10.0.5.1:80"
	cfg := trips(1, time.Minute, time.Minute)
	a := h.instance("A", h.store(nil, Options{}), key, cfg, nil)
	b := h.instance("B", h.store(nil, Options{}), key, cfg, nil)
	h.start(nil, a)
	h.start(nil, b)
	pre := b.b.Begin(breaker.KindClient)
	g := tripOn(t, a).Generation
	waitState(t, b, "sees A's trip", isOpenAt(g))
	marker, err := h.srv.Do("GET", testPrefix+"fleet")
	if err != nil || marker == "(nil)" {
		t.Fatalf("fleet marker %q %v", marker, err)
	}

	ks := keyspace{prefix: testPrefix}
	if _, err := h.srv.Do(append([]string{"DEL"}, ks.state(key)...)...); err != nil {
		t.Fatal(err)
	}
	raw := h.waitWrittenBack("redis holds the trip again", key, g)
	waitState(t, a, "reads the written-back trip", isOpenAt(raw.Gen))
	waitState(t, b, "reads the written-back trip", isOpenAt(raw.Gen))
	if n := a.store.Reconciled() + b.store.Reconciled(); n < 1 {
		t.Fatalf("reconciled %d keys", n)
	}
	if v, _ := h.srv.Do("GET", testPrefix+"fleet"); v != marker {
		t.Fatalf("fleet marker %q, was %q: the loss was not the marker's to tell", v, marker)
	}
	// A dial begun before the trip still closes nothing.
	b.b.Done(pre, breaker.Success)
	if st := b.b.State(); !st.Open || b.ev.n("close") != 0 {
		t.Fatalf("B after a pre-trip success: %s, %d closes", fmtState(st), b.ev.n("close"))
	}
}
