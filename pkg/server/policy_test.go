package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
)

// Allow and deny lists: deny wins over allow, an address outside a
// non-empty allow list is refused too, and a refused client is closed
// before any dial (the backend never sees it) and counted as "denied".
func TestPolicyAllowDeny(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "A", "")
	l := startLB(t, policyTOML(t, "",
		`allow = ["127.0.0.0/24"]
deny = ["127.0.0.5", "127.0.0.6/31"]`,
		"round-robin", "", beSpec{addr: be.Addr}), 0)

	servedSrcs := []string{"127.0.0.10", "127.0.0.11", "127.0.0.8"}
	deniedSrcs := []string{
		"127.0.0.5", // in allow and in deny: deny wins
		"127.0.0.6", // in a denied network
		"127.0.0.7",
		"127.0.1.1", // outside allow
		"127.9.9.9",
	}
	for _, src := range deniedSrcs {
		refused(t, dialFrom(t, src, l.addr), false)
	}
	waitCloses(t, l, relay.CloseDenied, int64(len(deniedSrcs)))
	if n := be.Accepted(); n != 0 {
		t.Fatalf("backend accepted %d connections for denied clients", n)
	}
	for _, src := range servedSrcs {
		tag, err := testnet.Hello(l.addr, src)
		if err != nil || tag != "A" {
			t.Fatalf("allowed client %s: %q, %v", src, tag, err)
		}
	}
	waitCloses(t, l, relay.CloseCompleted, int64(len(servedSrcs)))
	if n := be.Accepted(); n != int64(len(servedSrcs)) {
		t.Fatalf("backend accepted %d connections, want %d (the allowed clients only)", n, len(servedSrcs))
	}
	checkFrontCloses(t, l, map[relay.CloseReason]int64{
		relay.CloseDenied: int64(len(deniedSrcs)), relay.CloseCompleted: int64(len(servedSrcs)),
	})
	st := l.listener("front")
	if st.OK != int64(len(servedSrcs)) || st.Rejected != int64(len(deniedSrcs)) || st.Failed != 0 {
		t.Fatalf("stats %+v, want OK %d, Rejected %d", st, len(servedSrcs), len(deniedSrcs))
	}
}

// A deny list of 10,000 networks (a blocklist) refuses the address in it
// and serves its neighbours; its lookup is a binary search (pkg/ipset).
func TestPolicyLongDenyList(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "A", "")
	var deny strings.Builder
	deny.WriteString(`deny = ["127.0.0.40"`)
	for i := range 9999 {
		fmt.Fprintf(&deny, `, "10.%d.%d.0/24"`, i/256, i%256)
	}
	deny.WriteString("]")
	l := startLB(t, policyTOML(t, "", deny.String(), "round-robin", "", beSpec{addr: be.Addr}), 0)
	refused(t, dialFrom(t, "127.0.0.40", l.addr), false)
	waitCloses(t, l, relay.CloseDenied, 1)
	for _, src := range []string{"127.0.0.39", "127.0.0.41"} {
		if tag, err := testnet.Hello(l.addr, src); err != nil || tag != "A" {
			t.Fatalf("client %s, next to a denied address: %q, %v", src, tag, err)
		}
	}
}

// Allow and deny over IPv6: a /128 deny, and an allow list of IPv4 only
// that an IPv6 client is not in.
func TestPolicyAllowDenyIPv6(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "A", "")
	denied := startLB(t, policyTOML(t, freeAddr6(t), `deny = ["::1"]`, "round-robin", "", beSpec{addr: be.Addr}), 0)
	refused(t, dialFrom(t, "::1", denied.addr), false)
	waitCloses(t, denied, relay.CloseDenied, 1)
	v4only := startLB(t, policyTOML(t, freeAddr6(t), `allow = ["127.0.0.0/8"]`, "round-robin", "", beSpec{addr: be.Addr}), 0)
	refused(t, dialFrom(t, "::1", v4only.addr), false)
	waitCloses(t, v4only, relay.CloseDenied, 1)
	allowed := startLB(t, policyTOML(t, freeAddr6(t), `allow = ["::1/128"]
deny = ["2001:db8::/32"]`, "round-robin", "", beSpec{addr: be.Addr}), 0)
	if tag, err := testnet.Hello(allowed.addr, "::1"); err != nil || tag != "A" {
		t.Fatalf("allowed IPv6 client: %q, %v", tag, err)
	}
	if n := be.Accepted(); n != 1 {
		t.Fatalf("backend accepted %d connections, want 1", n)
	}
}

// source_ipv4_prefix: with 24, every address of a /24 is one source for
// max_connections_per_source; the next /24 is another.
func TestPolicySourcePrefix(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "A", "")
	l := startLB(t, policyTOML(t, "", "max_connections_per_source = 1\nsource_ipv4_prefix = 24",
		"round-robin", "", beSpec{addr: be.Addr}), 0)
	held := dialFrom(t, "127.0.0.30", l.addr)
	if tag := servedBy(t, held); tag != "A" {
		t.Fatalf("tag %q", tag)
	}
	refused(t, dialFrom(t, "127.0.0.31", l.addr), false) // same /24: at its cap
	waitCloses(t, l, relay.CloseSourceConnections, 1)
	other := dialFrom(t, "127.0.1.30", l.addr)
	if tag := servedBy(t, other); tag != "A" {
		t.Fatalf("a client of another /24: tag %q", tag)
	}
	if got := l.closesOf("front").Sources; got != 2 {
		t.Errorf("per-source limiter tracks %d sources, want 2 (two /24s)", got)
	}
	held.Close()
	testnet.Eventually(t, "the /24's connection to end in l4lb", func() bool { return l.server.Active() == 1 })
	c := dialFrom(t, "127.0.0.99", l.addr) // its slot is free again, for any address of it
	if tag := servedBy(t, c); tag != "A" {
		t.Fatalf("tag %q", tag)
	}
}

// max_connections_per_source: N connections of one client address are
// served, the next is refused ("source_connections"), another address is
// not affected, and a slot frees when one of the N closes.
func TestPolicyMaxConnectionsPerSource(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "A", "")
	const n = 3
	l := startLB(t, policyTOML(t, "", fmt.Sprintf("max_connections_per_source = %d", n),
		"round-robin", "", beSpec{addr: be.Addr}), 0)

	const srcA, srcB = "127.0.0.20", "127.0.0.21"
	var held []*net.TCPConn
	for range n {
		c := dialFrom(t, srcA, l.addr)
		if tag := servedBy(t, c); tag != "A" {
			t.Fatalf("tag %q", tag)
		}
		held = append(held, c)
	}
	refused(t, dialFrom(t, srcA, l.addr), false)
	waitCloses(t, l, relay.CloseSourceConnections, 1)

	// Another source is not affected.
	cb := dialFrom(t, srcB, l.addr)
	if tag := servedBy(t, cb); tag != "A" {
		t.Fatalf("tag %q", tag)
	}
	if got := l.closesOf("front").Sources; got != 2 {
		t.Errorf("per-source limiter tracks %d sources, want 2", got)
	}

	// One of srcA's connections closes: its slot frees, once.
	held[0].Close()
	testnet.Eventually(t, "the closed connection to end in l4lb", func() bool {
		return l.server.Active() == n // n-1 of srcA, one of srcB
	})
	c := dialFrom(t, srcA, l.addr)
	if tag := servedBy(t, c); tag != "A" {
		t.Fatalf("tag %q", tag)
	}
	refused(t, dialFrom(t, srcA, l.addr), false)
	waitCloses(t, l, relay.CloseSourceConnections, 2)
	if got := be.Accepted(); got != n+2 {
		t.Fatalf("backend accepted %d connections, want %d", got, n+2)
	}
	checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseSourceConnections: 2, relay.CloseCompleted: 1})

	// Every connection gone: the limiter forgets both sources.
	for _, c := range append(held, c, cb) {
		c.Close()
	}
	testnet.Eventually(t, "every client to end", func() bool { return l.server.Active() == 0 })
	if got := l.closesOf("front").Sources; got != 0 {
		t.Errorf("per-source limiter tracks %d sources with no connection open", got)
	}
	checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseSourceConnections: 2, relay.CloseCompleted: n + 2})
}

// A connection the policy admitted but could not serve (its backend at its
// cap, no backend at all) gives its per-source slot back.
func TestPolicySourceSlotReleasedOnRefusal(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "A", "")
	l := startLB(t, policyTOML(t, "", "max_connections_per_source = 2", "round-robin", "", beSpec{addr: be.Addr, maxConns: 1}), 0)
	const src = "127.0.0.50"
	c1 := dialFrom(t, src, l.addr)
	servedBy(t, c1)
	for i := range 3 {
		refused(t, dialFrom(t, src, l.addr), false)
		waitCloses(t, l, relay.CloseBackendCap, int64(i+1))
	}
	if n := l.closesOf("front").Closed[relay.CloseSourceConnections]; n != 0 {
		t.Fatalf("%d refused as source_connections: a slot was kept by a refused connection", n)
	}
	c1.Close()
	testnet.Eventually(t, "the first client to end", func() bool { return l.server.Active() == 0 })
	c2 := dialFrom(t, src, l.addr)
	servedBy(t, c2)
	refused(t, dialFrom(t, src, l.addr), false) // backend full again, source at 2 of 2 only now
	waitCloses(t, l, relay.CloseBackendCap, 4)
	checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseBackendCap: 4, relay.CloseCompleted: 1})

	// Nothing listens behind a second listener's pool: each dial fails,
	// and the source's slot comes back each time.
	noBackend := startLB(t, policyTOML(t, "", "max_connections_per_source = 1", "round-robin", "", beSpec{addr: closedAddr(t)}), 0)
	for i := range 3 {
		refused(t, dialFrom(t, src, noBackend.addr), false)
		waitCloses(t, noBackend, relay.CloseNoBackend, int64(i+1))
	}
	checkFrontCloses(t, noBackend, map[relay.CloseReason]int64{relay.CloseNoBackend: 3})
}

// rate_per_source with a rate so low no token comes back during the test:
// the burst is served, the next connection is refused ("source_rate"),
// another source is not affected.
func TestPolicyRatePerSource(t *testing.T) {
	noLeaks(t)
	be := testnet.StartBackend(t, "A", "")
	l := startLB(t, policyTOML(t, "", "rate_per_source = 0.01\nburst_per_source = 3",
		"round-robin", "", beSpec{addr: be.Addr}), 0)

	const srcA, srcB = "127.0.0.30", "127.0.0.31"
	for i := range 3 {
		if tag, err := testnet.Hello(l.addr, srcA); err != nil || tag != "A" {
			t.Fatalf("connection %d of the burst: %q, %v", i+1, tag, err)
		}
	}
	refused(t, dialFrom(t, srcA, l.addr), false)
	waitCloses(t, l, relay.CloseSourceRate, 1)
	if tag, err := testnet.Hello(l.addr, srcB); err != nil || tag != "A" {
		t.Fatalf("another source: %q, %v", tag, err)
	}
	refused(t, dialFrom(t, srcA, l.addr), false)
	waitCloses(t, l, relay.CloseSourceRate, 2)
	waitCloses(t, l, relay.CloseCompleted, 4)
	if got := be.Accepted(); got != 4 {
		t.Fatalf("backend accepted %d connections, want 4", got)
	}
	checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseSourceRate: 2, relay.CloseCompleted: 4})
}

// A backend's max_connections, with and without a queue in front of it.
func TestPolicyBackendMaxConnections(t *testing.T) {
	// queue_timeout 0: the client past the cap is refused at once.
	t.Run("refused", func(t *testing.T) {
		noLeaks(t)
		be := testnet.StartBackend(t, "A", "")
		l := startLB(t, policyTOML(t, "", "", "round-robin", "", beSpec{addr: be.Addr, maxConns: 1}), 0)
		c1 := dialFrom(t, "127.0.0.1", l.addr)
		servedBy(t, c1)
		refused(t, dialFrom(t, "127.0.0.1", l.addr), false)
		waitCloses(t, l, relay.CloseBackendCap, 1)
		if n := be.Accepted(); n != 1 {
			t.Fatalf("backend accepted %d connections, want 1", n)
		}
		// The slot frees when the first client goes.
		c1.Close()
		testnet.Eventually(t, "the first client to end", func() bool { return l.server.Active() == 0 })
		c3 := dialFrom(t, "127.0.0.1", l.addr)
		servedBy(t, c3)
		if q := l.closesOf("front").Queued; q != [3]int64{} {
			t.Fatalf("queued %v, want none (no queue_timeout)", q)
		}
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseBackendCap: 1, relay.CloseCompleted: 1})
	})

	// queue_timeout 10s: the client past the cap waits, and is served when
	// the first one leaves.
	t.Run("queued/served", func(t *testing.T) {
		noLeaks(t)
		be := testnet.StartBackend(t, "A", "")
		l := startLB(t, policyTOML(t, "", "", "round-robin", `queue_timeout = "10s"`, beSpec{addr: be.Addr, maxConns: 1}), 0)
		c1 := dialFrom(t, "127.0.0.1", l.addr)
		servedBy(t, c1)
		c2 := dialFrom(t, "127.0.0.1", l.addr)
		testnet.Eventually(t, "l4lb to accept the second client", func() bool { return l.server.Active() == 2 })
		l.barrier() // its accept turn, and so its queueing, is over
		if n := be.Accepted(); n != 1 {
			t.Fatalf("backend accepted %d connections while capped at 1", n)
		}
		payload := []byte("waited in the queue")
		if _, err := c2.Write(payload); err != nil { // waits in the kernel meanwhile
			t.Fatal(err)
		}
		c1.Close()
		if tag := servedBy(t, c2); tag != "A" {
			t.Fatalf("tag %q", tag)
		}
		readExactly(t, c2, payload)
		if q := l.closesOf("front").Queued; q != [3]int64{1, 0, 0} {
			t.Fatalf("queued (served, timeout, left) = %v, want [1 0 0]", q)
		}
		if n := be.Accepted(); n != 2 {
			t.Fatalf("backend accepted %d connections, want 2", n)
		}
		c2.Close()
		waitCloses(t, l, relay.CloseCompleted, 2)
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseCompleted: 2})
	})

	// queue_timeout 300ms and the slot never frees: refused after the wait.
	t.Run("queued/timeout", func(t *testing.T) {
		noLeaks(t)
		be := testnet.StartBackend(t, "A", "")
		l := startLB(t, policyTOML(t, "", "", "round-robin", `queue_timeout = "300ms"`, beSpec{addr: be.Addr, maxConns: 1}), 0)
		c1 := dialFrom(t, "127.0.0.1", l.addr)
		servedBy(t, c1)
		start := time.Now()
		refused(t, dialFrom(t, "127.0.0.1", l.addr), false)
		// One-sided on purpose: "not refused before queue_timeout" is the
		// behaviour (the counters below say the timeout ended the wait,
		// not when). A loaded machine only makes the wait longer; start is
		// taken before the dial, so the bound cannot fail a correct run.
		if waited := time.Since(start); waited < 290*time.Millisecond {
			t.Fatalf("refused after %v, before queue_timeout (300ms)", waited)
		}
		waitCloses(t, l, relay.CloseBackendCap, 1)
		if q := l.closesOf("front").Queued; q != [3]int64{0, 1, 0} {
			t.Fatalf("queued (served, timeout, left) = %v, want [0 1 0]", q)
		}
		if n := be.Accepted(); n != 1 {
			t.Fatalf("backend accepted %d connections, want 1", n)
		}
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseBackendCap: 1})
	})

	// A client that leaves while queued is counted as such.
	t.Run("queued/left", func(t *testing.T) {
		noLeaks(t)
		be := testnet.StartBackend(t, "A", "")
		l := startLB(t, policyTOML(t, "", "", "round-robin", `queue_timeout = "10s"`, beSpec{addr: be.Addr, maxConns: 1}), 0)
		c1 := dialFrom(t, "127.0.0.1", l.addr)
		servedBy(t, c1)
		c2 := dialFrom(t, "127.0.0.1", l.addr)
		testnet.Eventually(t, "l4lb to accept the second client", func() bool { return l.server.Active() == 2 })
		l.barrier()
		c2.SetLinger(0)
		c2.Close() // a reset
		waitCloses(t, l, relay.CloseClientLeft, 1)
		if q := l.closesOf("front").Queued; q != [3]int64{0, 0, 1} {
			t.Fatalf("queued (served, timeout, left) = %v, want [0 0 1]", q)
		}
		if n := be.Accepted(); n != 1 {
			t.Fatalf("backend accepted %d connections, want 1", n)
		}
	})

	// Two backends capped at 1 each: a client whose pick is the full one
	// goes to the other; with both full the next is refused.
	t.Run("skip-full", func(t *testing.T) {
		noLeaks(t)
		a := testnet.StartBackend(t, "A", "")
		b := testnet.StartBackend(t, "B", "")
		l := startLB(t, policyTOML(t, "", "", "ip-hash", "", beSpec{addr: a.Addr, maxConns: 1}, beSpec{addr: b.Addr, maxConns: 1}), 0)
		p := l.pools["p"]
		const src = "127.0.0.40"
		cands, _ := p.Plan(netip.MustParseAddrPort(src+":1"), nil)
		if len(cands) == 0 {
			t.Fatal("no plan")
		}
		owner := map[string]string{a.Addr: "A", b.Addr: "B"}[p.At(cands[0]).Addr]
		other := map[string]string{"A": "B", "B": "A"}[owner]

		c1 := dialFrom(t, src, l.addr)
		if tag := servedBy(t, c1); tag != owner {
			t.Fatalf("first client on %s, its hash owner is %s", tag, owner)
		}
		c2 := dialFrom(t, src, l.addr)
		if tag := servedBy(t, c2); tag != other {
			t.Fatalf("second client of the same source on %s, want %s (its owner %s is full)", tag, other, owner)
		}
		refused(t, dialFrom(t, "127.0.0.41", l.addr), false)
		waitCloses(t, l, relay.CloseBackendCap, 1)

		// The owner's slot frees: the source goes back to it.
		c1.Close()
		testnet.Eventually(t, "the first client to end", func() bool { return l.server.Active() == 1 })
		c4 := dialFrom(t, src, l.addr)
		if tag := servedBy(t, c4); tag != owner {
			t.Fatalf("after the owner freed a slot the source went to %s, want %s", tag, owner)
		}
		if a.Accepted()+b.Accepted() != 3 {
			t.Fatalf("backends accepted %d+%d connections, want 3", a.Accepted(), b.Accepted())
		}
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseBackendCap: 1, relay.CloseCompleted: 1})
	})
}

// An operator's weight: smooth weighted round robin with weights 3 and 1
// sends exactly 3 of every 4 sequential clients to the first backend; a
// weight out of range is refused and changes nothing.
func TestPolicySetWeight(t *testing.T) {
	noLeaks(t)
	a := testnet.StartBackend(t, "A", "")
	b := testnet.StartBackend(t, "B", "")
	l := startLB(t, policyTOML(t, "", "", "weighted-round-robin", "", beSpec{addr: a.Addr}, beSpec{addr: b.Addr}), 0)
	p := l.pools["p"]
	ba, ok := p.Backend(a.Addr)
	if !ok {
		t.Fatal("no backend A")
	}
	count := func(n int) map[string]int {
		t.Helper()
		got := map[string]int{}
		for range n {
			tag, err := testnet.Hello(l.addr, "")
			if err != nil {
				t.Fatal(err)
			}
			got[tag]++
		}
		return got
	}
	if got := count(40); got["A"] != 20 || got["B"] != 20 {
		t.Fatalf("weights 1/1: %v, want 20/20", got)
	}
	if err := p.SetWeight(context.Background(), ba, 3); err != nil {
		t.Fatal(err)
	}
	if ba.Weight() != 3 || ba.ConfiguredWeight() != 1 {
		t.Fatalf("weight %d (configured %d), want 3 (1)", ba.Weight(), ba.ConfiguredWeight())
	}
	if got := count(40); got["A"] != 30 || got["B"] != 10 {
		t.Fatalf("weights 3/1: %v, want 30/10", got)
	}
	for _, w := range []int{-1, 257, 1 << 20} {
		err := p.SetWeight(context.Background(), ba, w)
		if !errors.Is(err, pool.ErrBadWeight) {
			t.Fatalf("SetWeight(%d): %v, want ErrBadWeight", w, err)
		}
	}
	if ba.Weight() != 3 {
		t.Fatalf("weight %d after refused changes, want 3", ba.Weight())
	}
	if got := count(40); got["A"] != 30 || got["B"] != 10 {
		t.Fatalf("weights 3/1 after refused changes: %v, want 30/10", got)
	}
}

// Clients that wait on the policy (for a backend slot, for their PROXY
// header) when a shutdown runs out of time are cut like the rest, and
// counted once by reason (shutdown) and once by result (rejected: never
// relayed).
func TestPolicyShutdownCutsWaitingClients(t *testing.T) {
	shutdown := func(t *testing.T, l *lb) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := l.server.Shutdown(ctx); err == nil {
			t.Fatal("shutdown with clients open: no error")
		}
	}

	t.Run("queued", func(t *testing.T) {
		noLeaks(t)
		be := testnet.StartBackend(t, "A", "")
		l := startLB(t, policyTOML(t, "", "", "round-robin", `queue_timeout = "30s"`, beSpec{addr: be.Addr, maxConns: 1}), 0)
		c1 := dialFrom(t, "127.0.0.1", l.addr)
		servedBy(t, c1)
		c2 := dialFrom(t, "127.0.0.1", l.addr)
		testnet.Eventually(t, "l4lb to accept the second client", func() bool { return l.server.Active() == 2 })
		l.barrier()
		shutdown(t, l)
		refused(t, c1, true)
		refused(t, c2, true)
		if q := l.closesOf("front").Queued; q != [3]int64{0, 0, 1} {
			t.Errorf("queued (served, timeout, left) = %v, want [0 0 1]", q)
		}
		if st := l.listener("front"); st.OK != 1 || st.Rejected != 1 {
			t.Errorf("stats %+v, want 1 ok (relayed) and 1 rejected (queued)", st)
		}
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseShutdown: 2})
	})

	t.Run("proxy-header", func(t *testing.T) {
		noLeaks(t)
		be := testnet.StartBackend(t, "A", "")
		l := startLB(t, policyTOML(t, "", "accept_proxy = true\ntrusted_proxies = [\"127.0.0.0/8\"]\nproxy_timeout = \"30s\"",
			"round-robin", "", beSpec{addr: be.Addr}), 0)
		c := dialFrom(t, "127.0.0.1", l.addr)
		testnet.Eventually(t, "l4lb to accept the client", func() bool { return l.server.Active() == 1 })
		l.barrier()
		shutdown(t, l)
		refused(t, c, true)
		if st := l.listener("front"); st.Rejected != 1 {
			t.Errorf("stats %+v, want 1 rejected (never relayed)", st)
		}
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseShutdown: 1})
	})
}

// A backend of weight 0 (here set by an operator) takes no new client, so
// it must not keep the pool from being full: with every weighted backend
// at its max_connections the next client is refused (or queued), never
// sent past a cap.
func TestPolicyBackendCapWithZeroWeightBackend(t *testing.T) {
	noLeaks(t)
	a := testnet.StartBackend(t, "A", "")
	b := testnet.StartBackend(t, "B", "")
	l := startLB(t, policyTOML(t, "", "", "round-robin", "", beSpec{addr: a.Addr, maxConns: 1}, beSpec{addr: b.Addr}), 0)
	p := l.pools["p"]
	ba, _ := p.Backend(a.Addr)
	bb, _ := p.Backend(b.Addr)
	if err := p.SetWeight(context.Background(), bb, 0); err != nil {
		t.Fatal(err)
	}
	c1 := dialFrom(t, "127.0.0.1", l.addr)
	if tag := servedBy(t, c1); tag != "A" {
		t.Fatalf("first client on %s", tag)
	}
	c2 := dialFrom(t, "127.0.0.1", l.addr)
	c2.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := readLine(c2)
	if err == nil {
		t.Fatalf("second client served by %s with A at its max_connections (A holds %d, cap %d)", line, ba.Active(), ba.MaxConnections())
	}
	waitCloses(t, l, relay.CloseBackendCap, 1)
}
