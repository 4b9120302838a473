package discovery

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A truncated UDP answer is asked again over TCP.
func TestTruncatedAnswerRetriedOverTCP(t *testing.T) {
	srv := startDNSServer(t, rr("web.test.", 20, "A", "10.0.0.1"), rr("web.test.", 20, "AAAA", "2001:db8::1"))
	srv.setMode(truncating)
	h := run(t, spec("web.test", srv))
	h.wait()
	h.mustReport(be("10.0.0.1:9001", "web.test"), be("[2001:db8::1]:9001", "web.test"))
	for _, qtype := range []string{"A", "AAAA"} {
		if u, c := srv.count("udp", qtype, "web.test"), srv.count("tcp", qtype, "web.test"); u != 1 || c != 1 {
			t.Errorf("%s: %d queries over UDP and %d over TCP, want 1 and 1", qtype, u, c)
		}
	}
	srv.setMode(answering)
	h.step(20 * time.Second)
	h.mustNotReport()
	if c := srv.count("tcp", "", "web.test"); c != 2 {
		t.Errorf("%d queries over TCP once answers fit in UDP, want still 2", c)
	}
}

// A resolver that times out, refuses or fails is skipped for the next;
// the next lookup begins with the one that answered.
func TestResolverFailover(t *testing.T) {
	silentSrv := startDNSServer(t)
	silentSrv.setMode(silent)
	failing := startDNSServer(t)
	failing.setMode(servfail)
	good := startDNSServer(t, rr("web.test.", 20, "A", "10.0.0.1"))
	sp := spec("web.test")
	sp.Family = "ipv4"
	sp.Timeout = 500 * time.Millisecond // the silent one costs this, once
	sp.Resolvers = []string{silentSrv.addr, closedPort(t), failing.addr, good.addr}
	h := run(t, sp)
	h.wait()
	h.mustReport(be("10.0.0.1:9001", "web.test"))
	for _, s := range []*dnsServer{silentSrv, failing, good} {
		if n := s.count("udp", "A", "web.test"); n != 1 {
			t.Errorf("resolver %s asked %d times, want once", s.addr, n)
		}
	}
	h.step(20 * time.Second)
	h.mustNotReport()
	if n := good.count("udp", "A", "web.test"); n != 2 {
		t.Errorf("the answering resolver asked %d times in two lookups, want 2", n)
	}
	if n := silentSrv.count("udp", "A", "web.test"); n != 1 {
		t.Errorf("the silent resolver asked again (%d times): the next lookup should begin with the one that answered", n)
	}
	// The good one fails now: the list is walked around from it.
	good.setMode(servfail)
	failing.setMode(answering)
	failing.set(t, rr("web.test.", 20, "A", "10.0.0.2"))
	h.step(20 * time.Second)
	h.mustReport(be("10.0.0.2:9001", "web.test"))
	if n := silentSrv.count("udp", "A", "web.test"); n != 2 {
		t.Errorf("silent resolver asked %d times, want 2 (after the good one, before the next)", n)
	}
}

// Every resolver silent: the "timeout" result; one refusing among them:
// "error".
func TestResolversDownTimeoutOrError(t *testing.T) {
	for _, c := range []struct {
		name    string
		refused bool
		want    result
	}{{"silent", false, resultTimeout}, {"silent and refusing", true, resultError}} {
		t.Run(c.name, func(t *testing.T) {
			silentSrv := startDNSServer(t)
			silentSrv.setMode(silent)
			sp := spec("web.test", silentSrv)
			sp.Family = "ipv4"
			sp.Timeout = 200 * time.Millisecond
			if c.refused {
				sp.Resolvers = append(sp.Resolvers, closedPort(t))
			}
			h := run(t, sp)
			h.wait()
			h.mustReport()
			for r := range numResults {
				want := int64(0)
				if r == c.want {
					want = 1
				}
				if n := h.metrics.pool("web").lookups[r].Load(); n != want {
					t.Errorf("%d lookups counted %v, want %d", n, r, want)
				}
			}
			st := h.w.Status()
			if !st.Failing || strings.Contains(st.LastError, errTimeout.Error()) != (c.want == resultTimeout) {
				t.Fatalf("status: %+v", st)
			}
		})
	}
}

// family asks for A records only, AAAA only, or both.
func TestFamily(t *testing.T) {
	records := []string{rr("web.test.", 20, "A", "10.0.0.1"), rr("web.test.", 20, "AAAA", "2001:db8::1")}
	for _, c := range []struct {
		family string
		want   []Backend
		asked  []string
	}{
		{"ipv4", []Backend{be("10.0.0.1:9001", "web.test")}, []string{"A"}},
		{"ipv6", []Backend{be("[2001:db8::1]:9001", "web.test")}, []string{"AAAA"}},
		{"any", []Backend{be("10.0.0.1:9001", "web.test"), be("[2001:db8::1]:9001", "web.test")}, []string{"A", "AAAA"}},
		{"", []Backend{be("10.0.0.1:9001", "web.test"), be("[2001:db8::1]:9001", "web.test")}, []string{"A", "AAAA"}},
	} {
		t.Run("family="+c.family, func(t *testing.T) {
			srv := startDNSServer(t, records...)
			sp := spec("web.test", srv)
			sp.Family = c.family
			h := run(t, sp)
			h.wait()
			h.mustReport(c.want...)
			var asked []string
			for _, qtype := range []string{"A", "AAAA"} {
				if srv.count("udp", qtype, "web.test") > 0 {
					asked = append(asked, qtype)
				}
			}
			if !slices.Equal(asked, c.asked) {
				t.Fatalf("asked for %v, want %v", asked, c.asked)
			}
		})
	}
}

// A CNAME chain in the answer is followed: its addresses count, and its
// TTLs bound the refresh.
func TestCNAMEChain(t *testing.T) {
	srv := startDNSServer(t, rr("web.test.", 15, "CNAME", "real.test."), rr("real.test.", 40, "A", "10.0.0.7"))
	sp := spec("web.test", srv)
	sp.Family = "ipv4"
	sp.MinRefresh = time.Second
	h := run(t, sp)
	if d := h.wait(); d != 15*time.Second {
		t.Fatalf("waits %v after a CNAME of TTL 15 to an A of 40, want 15s", d)
	}
	h.mustReport(be("10.0.0.7:9001", "web.test"))
}

// The resolvers come from resolv.conf when the spec names none, read
// again at every lookup; none readable: the local resolver.
func TestResolversFromResolvConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := compile(Spec{DNS: "web.test:80", ResolvConf: path})
	if err != nil {
		t.Fatal(err)
	}
	r := resolvers{plan: &p}
	write("search example.test\nnameserver 192.0.2.1\nnameserver 2001:db8::53\noptions ndots:2\n")
	if got, want := r.servers(), []string{"192.0.2.1:53", "[2001:db8::53]:53"}; !slices.Equal(got, want) {
		t.Fatalf("servers %v, want %v", got, want)
	}
	write("nameserver 192.0.2.9\n")
	if got, want := r.servers(), []string{"192.0.2.9:53"}; !slices.Equal(got, want) {
		t.Fatalf("servers after an edit %v, want %v", got, want)
	}
	os.Remove(path)
	if got, want := r.servers(), []string{"127.0.0.1:53", "[::1]:53"}; !slices.Equal(got, want) {
		t.Fatalf("servers without the file %v, want %v", got, want)
	}
}
