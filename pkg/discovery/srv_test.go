package discovery

import (
	"net/netip"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

func srvSpec(name string, srv *dnsServer) Spec {
	s := spec("unused", srv)
	s.DNS, s.SRV = "", name
	return s
}

func sbe(addr, target string, weight int, prio uint16) Backend {
	return Backend{Addr: netip.MustParseAddrPort(addr), Weight: weight, Priority: prio, Target: target}
}

// The lowest priority value whose targets resolve makes the set; its
// weights map into 1..MaxWeight; its targets' addresses take the
// records' ports.
func TestSRVPriorityAndWeights(t *testing.T) {
	srv := startDNSServer(t,
		rr("_web._tcp.svc.test.", 30, "SRV", "1 10 9001 gone.svc.test."),    // resolves to nothing
		rr("_web._tcp.svc.test.", 30, "SRV", "1 10 9001 ."),                 // "not available"
		rr("_web._tcp.svc.test.", 30, "SRV", "5 20 9002 a.svc.test."),       // two addresses
		rr("_web._tcp.svc.test.", 30, "SRV", "5 0 9003 b.svc.test."),        // weight 0
		rr("_web._tcp.svc.test.", 30, "SRV", "9 100 9004 backup.svc.test."), // not reached
		rr("a.svc.test.", 12, "A", "10.0.0.1"), rr("a.svc.test.", 12, "A", "10.0.0.2"),
		rr("b.svc.test.", 30, "AAAA", "2001:db8::b"),
		rr("backup.svc.test.", 30, "A", "10.0.0.9"),
	)
	h := run(t, srvSpec("_web._tcp.svc.test", srv))
	if d := h.wait(); d != 12*time.Second {
		t.Fatalf("waits %v, want the lowest TTL of what made the set (a's 12s) within the bounds", d)
	}
	h.mustReport(
		sbe("10.0.0.1:9002", "a.svc.test", 20, 5), sbe("10.0.0.2:9002", "a.svc.test", 20, 5),
		sbe("[2001:db8::b]:9003", "b.svc.test", 1, 5))
	if n := srv.count("udp", "", "backup.svc.test"); n != 0 {
		t.Fatalf("the target of a higher priority value was resolved (%d queries)", n)
	}

	// Weights above MaxWeight scale down by the group's largest.
	srv.set(t,
		rr("_web._tcp.svc.test.", 30, "SRV", "0 1000 9001 a.svc.test."),
		rr("_web._tcp.svc.test.", 30, "SRV", "0 500 9001 b.svc.test."),
		rr("a.svc.test.", 30, "A", "10.0.0.1"), rr("b.svc.test.", 30, "A", "10.0.0.2"))
	h.step(12 * time.Second)
	h.mustReport(sbe("10.0.0.1:9001", "a.svc.test", config.MaxWeight, 0), sbe("10.0.0.2:9001", "b.svc.test", 128, 0))

	// No target of any priority resolves: empty (a first empty answer
	// with a set to keep starts the grace).
	srv.set(t, rr("_web._tcp.svc.test.", 30, "SRV", "0 10 9001 gone.svc.test."))
	h.step(30 * time.Second)
	h.mustNotReport()
	if n := h.metrics.pool("web").lookups[resultEmpty].Load(); n != 1 {
		t.Fatalf("%d empty lookups counted, want 1", n)
	}
	// No SRV name at all: NXDOMAIN.
	srv.set(t)
	h.step(10 * time.Second)
	if n := h.metrics.pool("web").lookups[resultNXDomain].Load(); n != 1 {
		t.Fatalf("%d nxdomain lookups counted, want 1", n)
	}
}

// Two records naming one address make one backend, with the higher
// weight.
func TestSRVDuplicateAddressesMerge(t *testing.T) {
	srv := startDNSServer(t,
		rr("_web._tcp.svc.test.", 30, "SRV", "0 5 9001 a.svc.test."),
		rr("_web._tcp.svc.test.", 30, "SRV", "0 20 9001 alias.svc.test."),
		rr("_web._tcp.svc.test.", 30, "SRV", "0 7 9001 A.svc.test."), // a again, other case: asked once
		rr("a.svc.test.", 30, "A", "10.0.0.1"), rr("alias.svc.test.", 30, "A", "10.0.0.1"))
	sp := srvSpec("_web._tcp.svc.test", srv)
	sp.Family = "ipv4"
	h := run(t, sp)
	h.wait()
	h.mustReport(sbe("10.0.0.1:9001", "alias.svc.test", 20, 0))
	if n := srv.count("udp", "A", "a.svc.test"); n != 1 {
		t.Fatalf("a.svc.test asked %d times, want once", n)
	}
}

// A target that cannot be resolved fails the lookup: a set without it
// would drop backends that still exist.
func TestSRVTargetFailureFailsTheLookup(t *testing.T) {
	srv := startDNSServer(t,
		rr("_web._tcp.svc.test.", 30, "SRV", "0 5 9001 a.svc.test."),
		rr("a.svc.test.", 30, "A", "10.0.0.1"))
	h := run(t, srvSpec("_web._tcp.svc.test", srv))
	h.wait()
	h.mustReport(sbe("10.0.0.1:9001", "a.svc.test", 5, 0))
	srv.set(t, rr("_web._tcp.svc.test.", 30, "SRV", "0 5 9001 a.svc.test."), rr("_web._tcp.svc.test.", 30, "SRV", "0 5 9001 b.svc.test."),
		rr("a.svc.test.", 30, "A", "10.0.0.1"))
	srv.failName("b.svc.test")
	h.step(30 * time.Second)
	h.mustNotReport()
	if !h.w.Status().Failing {
		t.Fatal("not failing")
	}
}

func TestSRVWeightMapping(t *testing.T) {
	for _, c := range []struct {
		weight, largest uint16
		want            int
	}{
		{0, 0, 1}, {0, 100, 1}, {1, 100, 1}, {100, 100, 100}, {256, 256, 256},
		{257, 257, 256}, {65535, 65535, 256}, {0, 65535, 1}, {128, 65535, 1}, {32768, 65535, 128}, {500, 1000, 128},
	} {
		if got := srvWeight(c.weight, c.largest); got != c.want {
			t.Errorf("srvWeight(%d, largest %d) = %d, want %d", c.weight, c.largest, got, c.want)
		}
	}
}
