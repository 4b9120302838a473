package testnet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ZoneDNS is a Dnsmasq that answers a zone of the test's own from a hosts
// file (A and AAAA; --addn-hosts, read again on Reload) and from options
// given at start (SRV records: --srv-host, changed with RestartRecords).
// It is the zone's authority (--local): a name it lacks is NXDOMAIN and a
// type it lacks (AAAA of an IPv4-only name) an empty answer, not the
// REFUSED a forwarder without upstreams gives. Its records live 1 s
// (--local-ttl, unless the test says otherwise).
type ZoneDNS struct {
	*Dnsmasq
	Zone  string
	Hosts string // the hosts file's path
}

// StartZoneDNS starts dnsmasq on ip (Dnsmasq's Answer: answer) serving
// zone from hosts (the file's text) and the records in extra.
func StartZoneDNS(t testing.TB, ip, answer, zone, hosts string, extra ...string) *ZoneDNS {
	t.Helper()
	NeedDNSTools(t)
	// dnsmasq reads the file as nobody once it has dropped root.
	z := &ZoneDNS{Zone: zone, Hosts: filepath.Join(OpenTempDir(t, "l4lb-dnsmasq-"), "hosts")}
	z.WriteHosts(t, hosts)
	z.Dnsmasq = StartDnsmasqWith(t, ip, answer, z.options(extra...)...)
	return z
}

// options are dnsmasq's for the zone and extra; a --local-ttl in extra
// takes the place of the 1 s (dnsmasq refuses the flag twice).
func (z *ZoneDNS) options(extra ...string) []string {
	opts := []string{"--addn-hosts=" + z.Hosts, "--local=/" + z.Zone + "/"}
	if !slices.ContainsFunc(extra, func(o string) bool { return strings.HasPrefix(o, "--local-ttl=") }) {
		opts = append(opts, "--local-ttl=1")
	}
	return append(opts, extra...)
}

// WriteHosts replaces the hosts file (world-readable); Reload makes
// dnsmasq read it.
func (z *ZoneDNS) WriteHosts(t testing.TB, hosts string) {
	t.Helper()
	if err := os.WriteFile(z.Hosts, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
}

// RestartRecords restarts dnsmasq on its address with the records of
// extra in place of those it had (dnsmasq reads options only at start).
func (z *ZoneDNS) RestartRecords(t testing.TB, extra ...string) {
	t.Helper()
	z.RestartWith(t, z.options(extra...)...)
}
