package discovery

import (
	"net/netip"
	"testing"
	"time"
)

// spec is a DNS spec of name:9001 asking the servers, with bounds of
// 10s and 60s and a grace of 30s.
func spec(name string, servers ...*dnsServer) Spec {
	s := Spec{DNS: name + ":9001", MinRefresh: 10 * time.Second, MaxRefresh: time.Minute, EmptyGrace: 30 * time.Second, Timeout: patience}
	for _, srv := range servers {
		s.Resolvers = append(s.Resolvers, srv.addr)
	}
	return s
}

// oneBackend starts a server with web.test's A record 10.0.0.1 (TTL 20s)
// and more records, and a watcher of it that has reported that set.
func oneBackend(t *testing.T, more ...string) (*dnsServer, *harness) {
	t.Helper()
	srv := startDNSServer(t, append([]string{rr("web.test.", 20, "A", "10.0.0.1")}, more...)...)
	h := run(t, spec("web.test", srv))
	h.wait()
	h.mustReport(be("10.0.0.1:9001", "web.test"))
	return srv, h
}

// The next lookup is due at the answer's lowest TTL, within the bounds.
func TestRefreshAtLowestTTLWithinBounds(t *testing.T) {
	srv := startDNSServer(t, rr("web.test.", 30, "A", "10.0.0.1"), rr("web.test.", 40, "A", "10.0.0.2"))
	h := run(t, spec("web.test", srv))
	d := h.wait()
	if d != 30*time.Second {
		t.Fatalf("waits %v after TTLs 30 and 40, want 30s", d)
	}
	h.mustReport(be("10.0.0.1:9001", "web.test"), be("10.0.0.2:9001", "web.test"))
	for _, c := range []struct {
		ttl  int
		want time.Duration
	}{{5, 10 * time.Second}, {0, 10 * time.Second}, {600, time.Minute}, {45, 45 * time.Second}} {
		srv.set(t, rr("web.test.", c.ttl, "A", "10.0.0.1"), rr("web.test.", 3600, "A", "10.0.0.2"))
		if d = h.step(d); d != c.want {
			t.Fatalf("TTL %d: waits %v, want %v", c.ttl, d, c.want)
		}
	}
	h.mustNotReport() // the addresses never changed
	// A negative answer's TTL is the SOA's (RFC 2308): here 5s, so the
	// bound.
	srv.set(t)
	if d := h.step(d); d != 10*time.Second {
		t.Fatalf("NXDOMAIN with an SOA TTL of 5s: waits %v, want 10s", d)
	}
}

// A failing resolver keeps the last set; the failing state logs once as
// it begins and once as it ends; retries back off from MinRefresh to
// MaxRefresh.
func TestFailuresKeepTheSetAndLogTheStateOnce(t *testing.T) {
	srv, h := oneBackend(t)
	srv.setMode(servfail)
	d := 20 * time.Second
	for _, want := range []time.Duration{10, 20, 40, 60, 60} {
		d = h.step(d)
		if d != want*time.Second {
			t.Fatalf("failure retry after %v, want %v", d, want*time.Second)
		}
		h.mustNotReport()
	}
	st := h.w.Status()
	if !st.Failing || !st.FailingSince.Equal(epoch.Add(20*time.Second)) || st.LastError == "" || st.Backends != 1 {
		t.Fatalf("status while failing: %+v", st)
	}
	h.log.expect(t, "discovery: lookups failing", 1)
	srv.setMode(answering)
	if d = h.step(d); d != 20*time.Second {
		t.Fatalf("waits %v after the recovery, want the TTL, 20s", d)
	}
	h.mustNotReport()
	st = h.w.Status()
	if st.Failing || !st.LastSuccess.Equal(h.clk.Now()) || st.LastError == "" {
		t.Fatalf("status after the recovery: %+v", st)
	}
	h.log.expect(t, "discovery: lookups answer again", 1)
	// A new failure streak backs off from MinRefresh again.
	srv.setMode(servfail)
	if d = h.step(d); d != 10*time.Second {
		t.Fatalf("first retry of a new streak after %v, want 10s", d)
	}
	h.log.expect(t, "discovery: lookups failing", 2)
}

// NXDOMAIN or no records keeps the last set for EmptyGrace, then the
// empty set is reported; records within the grace cancel it.
func TestEmptyGrace(t *testing.T) {
	soa := rr("test.", 25, "SOA", "ns.test. hostmaster.test. 1 60 60 600 25")
	srv, h := oneBackend(t, soa)

	srv.set(t, soa) // NXDOMAIN
	if d := h.step(20 * time.Second); d != 25*time.Second {
		t.Fatalf("first empty answer: waits %v, want the SOA's 25s", d)
	}
	h.mustNotReport()
	if since := h.w.Status().EmptySince; !since.Equal(epoch.Add(20 * time.Second)) {
		t.Fatalf("EmptySince %v, want the first empty answer's time", since)
	}
	srv.set(t, rr("web.test.", 20, "A", "10.0.0.1"), soa)
	if d := h.step(25 * time.Second); d != 20*time.Second {
		t.Fatalf("records again: waits %v, want 20s", d)
	}
	h.mustNotReport()
	if st := h.w.Status(); !st.EmptySince.IsZero() {
		t.Fatalf("the grace still runs after records came back: %+v", st)
	}

	// No records of the wanted type (NODATA) starts a grace too; the
	// lookup at its end reports the empty set.
	srv.set(t, rr("web.test.", 20, "TXT", `"not an address"`), soa)
	if d := h.step(20 * time.Second); d != 25*time.Second {
		t.Fatalf("NODATA: waits %v, want 25s", d)
	}
	if d := h.step(25 * time.Second); d != 5*time.Second {
		t.Fatalf("second empty answer, 25s into a 30s grace: waits %v, want the 5s left", d)
	}
	h.mustNotReport()
	if d := h.step(5 * time.Second); d != 25*time.Second {
		t.Fatalf("at the grace's end: waits %v, want 25s", d)
	}
	s := h.mustReport()
	if got := s.At.Sub(epoch.Add(65 * time.Second)); got != 30*time.Second {
		t.Fatalf("the empty set came %v after the first empty answer, want the grace, 30s", got)
	}
	h.log.expect(t, "discovery: no records for empty_grace", 1)
	h.step(25 * time.Second)
	h.mustNotReport() // empty again: no change, no new grace
	if st := h.w.Status(); !st.EmptySince.IsZero() || st.Backends != 0 {
		t.Fatalf("status once empty: %+v", st)
	}
}

// A failure during the grace does not hold it off: the answer that said
// there are no records stands.
func TestEmptyGraceEndsThroughFailures(t *testing.T) {
	srv, h := oneBackend(t)
	srv.set(t)
	h.step(20 * time.Second) // empty: grace until 50s, next at 30s
	srv.setMode(servfail)
	d := h.step(10 * time.Second) // at 30s: fails, retry in 10s
	d = h.step(d)                 // at 40s: fails, retry in 20s, cut to the 10s left
	if d != 10*time.Second {
		t.Fatalf("retry during the grace after %v, want the 10s left of it", d)
	}
	h.mustNotReport()
	h.step(d)
	if s := h.mustReport(); !s.At.Equal(epoch.Add(50 * time.Second)) {
		t.Fatalf("empty set at %v, want the grace's end", s.At)
	}
}

// OnChange is called once for the first answer and then only when the
// set differs.
func TestOnChangeOnlyOnChange(t *testing.T) {
	srv := startDNSServer(t, rr("web.test.", 20, "A", "10.0.0.2"), rr("web.test.", 20, "A", "10.0.0.1"))
	h := run(t, spec("web.test", srv))
	h.wait()
	first := h.mustReport(be("10.0.0.1:9001", "web.test"), be("10.0.0.2:9001", "web.test"))
	if !first.At.Equal(epoch) {
		t.Fatalf("first set At %v, want the clock's time %v", first.At, epoch)
	}
	srv.set(t, rr("web.test.", 20, "A", "10.0.0.1"), rr("web.test.", 20, "A", "10.0.0.2")) // other order
	h.step(20 * time.Second)
	h.mustNotReport()
	srv.set(t, rr("web.test.", 20, "A", "10.0.0.1"), rr("web.test.", 20, "A", "10.0.0.3"))
	h.step(20 * time.Second)
	h.mustReport(be("10.0.0.1:9001", "web.test"), be("10.0.0.3:9001", "web.test"))
	srv.set(t, rr("web.test.", 20, "A", "10.0.0.1"), rr("web.test.", 20, "A", "10.0.0.2"))
	h.step(20 * time.Second)
	h.mustReport(be("10.0.0.1:9001", "web.test"), be("10.0.0.2:9001", "web.test"))
	h.step(20 * time.Second)
	h.mustNotReport()
	if st := h.w.Status(); st.Backends != 2 {
		t.Fatalf("status: %+v", st)
	}
}

// A first lookup that fails reports the empty set at once (the pool
// starts empty), then the set when the resolver answers.
func TestFirstLookupFailingReportsEmpty(t *testing.T) {
	srv := startDNSServer(t, rr("web.test.", 20, "A", "10.0.0.1"))
	srv.setMode(servfail)
	h := run(t, spec("web.test", srv))
	if d := h.wait(); d != 10*time.Second {
		t.Fatalf("first failure: retry after %v, want 10s", d)
	}
	h.mustReport()
	// Its log says no set was ever found, not that the last one is kept.
	h.log.expect(t, "discovery: lookups failing before any answer", 1)
	h.log.expect(t, "discovery: lookups failing: keeping the last set", 0)
	srv.setMode(answering)
	h.step(10 * time.Second)
	h.mustReport(be("10.0.0.1:9001", "web.test"))
}

// A watcher started from another process's set (an upgrade's old one)
// keeps it through a failing first lookup and through the empty grace,
// and reports the first set that differs.
func TestInitialSetKeptLikeAReportedOne(t *testing.T) {
	srv := startDNSServer(t, rr("web.test.", 20, "A", "10.0.0.1"))
	srv.setMode(servfail)
	h := runFrom(t, spec("web.test", srv), []Backend{{Addr: netip.MustParseAddrPort("10.0.0.1:9001"), Weight: 1}})
	d := h.wait()
	h.mustNotReport()
	if st := h.w.Status(); st.Backends != 1 || !st.Failing {
		t.Fatalf("after a failed first lookup: %+v; want the initial backend kept, failing", st)
	}
	srv.setMode(answering)
	srv.set(t) // the name is gone: the grace begins
	d = h.step(d)
	h.mustNotReport()
	if st := h.w.Status(); st.EmptySince.IsZero() {
		t.Fatalf("after NXDOMAIN: %+v; want the empty grace under way", st)
	}
	srv.set(t, rr("web.test.", 20, "A", "10.0.0.2"))
	h.step(d)
	h.mustReport(be("10.0.0.2:9001", "web.test"))
}

// A first lookup that finds no records reports the empty set at once:
// there is no set to keep.
func TestFirstLookupEmptyReportsEmpty(t *testing.T) {
	srv := startDNSServer(t)
	h := run(t, spec("web.test", srv))
	h.wait()
	h.mustReport()
	if st := h.w.Status(); !st.EmptySince.IsZero() || st.Failing {
		t.Fatalf("status: %+v", st)
	}
}
