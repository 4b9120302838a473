package discovery

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Against a real DNS server no one here wrote: dnsmasq serving A and
// AAAA records from a hosts file (--addn-hosts, read again on SIGHUP)
// and SRV records from its options (--srv-host, read at start), on the
// real clock.

// dnsmasqZone is the zone of the tests' records: dnsmasq answers it
// from its own data only (--local), so a name it does not have is
// NXDOMAIN.
const dnsmasqZone = "disc.test"

type realDNS = testnet.ZoneDNS

// startRealDNS starts dnsmasq serving dnsmasqZone with hosts as its hosts
// file and extra options.
func startRealDNS(t *testing.T, hosts string, extra ...string) *realDNS {
	t.Helper()
	return testnet.StartZoneDNS(t, "127.0.55.1", "10.55.0.1", dnsmasqZone, hosts, extra...)
}

// watch runs a watcher of s on the real clock until the test ends.
type watch struct {
	t    *testing.T
	dns  *realDNS
	w    *Watcher
	sets chan Set
	log  *lockedBuffer
	last Set
}

func startWatch(t *testing.T, d *realDNS, s Spec, m *Metrics) *watch {
	t.Helper()
	wt := &watch{t: t, dns: d, sets: make(chan Set, 1000), log: &lockedBuffer{}}
	var err error
	wt.w, err = NewWatcher(s, Options{Pool: "web", Metrics: m, Log: slogTo(wt.log), OnChange: func(s Set) { wt.sets <- s }})
	if err != nil {
		t.Fatal(err)
	}
	goRun(t, wt.w)
	return wt
}

// until waits for a reported set with exactly want, failing after a
// generous deadline; it returns that set.
func (wt *watch) until(want ...Backend) Set {
	wt.t.Helper()
	deadline := time.After(patience)
	for {
		if slices.Equal(wt.last.Backends, want) && !wt.last.At.IsZero() {
			return wt.last
		}
		select {
		case wt.last = <-wt.sets:
		case <-deadline:
			wt.t.Fatalf("no set of the %d backends wanted within %v; last %d: %v; status %+v; log:\n%s\ndnsmasq:\n%s", len(want), patience, len(wt.last.Backends), wt.last.Backends, wt.w.Status(), wt.log, wt.dns.Log())
		}
	}
}

// quiet fails if a set was reported since the last one seen.
func (wt *watch) quiet() {
	wt.t.Helper()
	select {
	case s := <-wt.sets:
		wt.t.Fatalf("reported %v; want the last set %v kept", s.Backends, wt.last.Backends)
	default:
	}
}

func realSpec(name string, d *realDNS) Spec {
	return Spec{DNS: name + ":9001", Resolvers: []string{d.Addr}, MinRefresh: 100 * time.Millisecond,
		MaxRefresh: time.Second, EmptyGrace: time.Second, Timeout: 2 * time.Second}
}

// An address added to the hosts file shows after SIGHUP; with dnsmasq
// stopped the last set stays; a name removed empties the set only after
// the grace.
func TestDnsmasqHostsFile(t *testing.T) {
	d := startRealDNS(t, "127.0.10.1 web.disc.test\n")
	m, _ := NewMetrics(nil)
	wt := startWatch(t, d, realSpec("web.disc.test", d), m)
	wt.until(be("127.0.10.1:9001", "web.disc.test"))

	d.WriteHosts(t, "127.0.10.1 web.disc.test\n127.0.10.2 web.disc.test\nfd00::2 web.disc.test\n")
	d.Reload(t)
	wt.until(be("127.0.10.1:9001", "web.disc.test"), be("127.0.10.2:9001", "web.disc.test"), be("[fd00::2]:9001", "web.disc.test"))

	d.Kill()
	series := m.pool("web")
	failures := func() int64 { return series.lookups[resultError].Load() + series.lookups[resultTimeout].Load() }
	if !testnet.WaitUntil(patience, func() bool { return failures() >= 3 }) {
		t.Fatalf("%d failed lookups with dnsmasq stopped; status %+v", failures(), wt.w.Status())
	}
	wt.quiet()
	if st := wt.w.Status(); !st.Failing || st.Backends != 3 {
		t.Fatalf("status with dnsmasq stopped: %+v", st)
	}
	wt.log.expect(t, "discovery: lookups failing", 1)

	d.WriteHosts(t, "127.0.10.9 other.disc.test\n")
	removed := time.Now() // before dnsmasq can answer NXDOMAIN
	d.RestartRecords(t)
	s := wt.until()
	if got := s.At.Sub(removed); got < time.Second {
		t.Fatalf("the set emptied %v after the name was removed, before the 1s grace", got)
	}
	if n := series.lookups[resultNXDomain].Load(); n == 0 {
		t.Fatal("no lookup counted nxdomain")
	}
	if st := wt.w.Status(); st.Failing || st.LastSuccess.IsZero() {
		t.Fatalf("status after dnsmasq came back: %+v", st)
	}
	wt.log.expect(t, "discovery: lookups answer again", 1)
}

// An answer too big for UDP comes truncated; the watcher asks again
// over TCP and gets every address.
func TestDnsmasqTruncatedAnswer(t *testing.T) {
	var hosts strings.Builder
	var want []Backend
	for i := range 300 {
		addr := netip.AddrFrom4([4]byte{127, 0, 11 + byte(i/200), byte(1 + i%200)})
		fmt.Fprintf(&hosts, "%s big.disc.test\n", addr)
		want = append(want, be(netip.AddrPortFrom(addr, 9001).String(), "big.disc.test"))
	}
	d := startRealDNS(t, hosts.String())
	// Over UDP alone the answer comes truncated: only the fallback gets
	// all of it.
	m := new(dns.Msg)
	m.SetQuestion("big.disc.test.", dns.TypeA)
	m.SetEdns0(udpSize, false)
	in, _, err := (&dns.Client{Timeout: patience}).Exchange(m, d.Addr)
	if err != nil {
		t.Fatalf("a UDP query for 300 addresses: %v", err)
	}
	if !in.Truncated || len(in.Answer) >= 300 {
		t.Fatalf("a UDP query for 300 addresses: %d records, truncated %v; want a truncated answer", len(in.Answer), in.Truncated)
	}
	s := realSpec("big.disc.test", d)
	s.Family = "ipv4"
	wt := startWatch(t, d, s, nil)
	slices.SortFunc(want, func(a, b Backend) int { return a.Addr.Compare(b.Addr) })
	wt.until(want...)
}

// SRV records from dnsmasq's options: the lowest priority value, its
// weights; a weight changed (dnsmasq restarted with it) changes the
// backend's weight.
func TestDnsmasqSRV(t *testing.T) {
	srv := func(target string, port, prio, weight int) string {
		return fmt.Sprintf("--srv-host=_web._tcp.%s,%s.%s,%d,%d,%d", dnsmasqZone, target, dnsmasqZone, port, prio, weight)
	}
	d := startRealDNS(t, "127.0.10.1 a.disc.test\n127.0.10.2 b.disc.test\n127.0.10.3 c.disc.test\n",
		srv("a", 9001, 0, 10), srv("b", 9002, 0, 30), srv("c", 9003, 1, 100))
	s := realSpec("", d)
	s.DNS, s.SRV, s.Family = "", "_web._tcp."+dnsmasqZone, "ipv4"
	wt := startWatch(t, d, s, nil)
	wt.until(sbe("127.0.10.1:9001", "a.disc.test", 10, 0), sbe("127.0.10.2:9002", "b.disc.test", 30, 0))
	d.RestartRecords(t, srv("a", 9001, 0, 10), srv("b", 9002, 0, 60), srv("c", 9003, 1, 100))
	wt.until(sbe("127.0.10.1:9001", "a.disc.test", 10, 0), sbe("127.0.10.2:9002", "b.disc.test", 60, 0))
	// The priority-0 targets gone from the hosts file: priority 1 serves.
	d.WriteHosts(t, "127.0.10.3 c.disc.test\n")
	d.Reload(t)
	wt.until(sbe("127.0.10.3:9003", "c.disc.test", 100, 1))
}
