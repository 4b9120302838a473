package proxyproto

import (
	"net/netip"
	"strings"
	"testing"
)

var addrTexts = []string{
	// valid
	"0.0.0.0", "1.2.3.4", "255.255.255.255", "10.0.0.10",
	"::", "::1", "1::", "1::2", "2001:db8::1", "2001:DB8:0:0:0:0:0:1", ffff,
	"1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3::6:7:8",
	"::ffff:192.0.2.1", "::192.0.2.1", "1:2:3:4:5:6:1.2.3.4", "1::1.2.3.4", "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
	"0000:0000:0000:0000:0000:0000:0000:0000",
	// invalid
	"", ".", "1.2.3", "1.2.3.4.", ".1.2.3.4", "1..2.3", "01.2.3.4", "1.2.3.04", "256.1.1.1", "1.2.3.4.5", "1.2.3.-4",
	":", ":::", "1:", ":1", "1:::2", "1::2::3", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8",
	"1:2:3:4::5:6:7:8", "12345::", "g::", "1:2:3:4:5:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3", "::1.2.3.04",
	"::ffff:1.2.3.4:1", "1.2.3.4::", "fe80::1%eth0", " ::1", "::1 ",
}

// TestAddrMatchesNetip: the byte parsers accept what netip.ParseAddr
// accepts, with the same value, and every prefix of an accepted address is
// a valid beginning.
func TestAddrMatchesNetip(t *testing.T) {
	for _, s := range addrTexts {
		checkAddr(t, s)
	}
}

func checkAddr(t *testing.T, s string) {
	t.Helper()
	want, err := netip.ParseAddr(s)
	if strings.Contains(s, "%") {
		err, want = errZone, netip.Addr{} // zones are refused
	}
	ip4, ok4 := ipv4([]byte(s), false)
	if want4 := err == nil && want.Is4(); ok4 != want4 || (ok4 && netip.AddrFrom4(ip4) != want) {
		t.Errorf("ipv4(%q) = %v, %v; netip says %v, %v", s, ip4, ok4, want, err)
	}
	ip6, ok6 := ipv6([]byte(s), false)
	if want6 := err == nil && want.Is6(); ok6 != want6 || (ok6 && netip.AddrFrom16(ip6) != want) {
		t.Errorf("ipv6(%q) = %v, %v; netip says %v, %v", s, ip6, ok6, want, err)
	}
	for k := 0; k <= len(s); k++ {
		if _, ok := ipv4([]byte(s[:k]), true); ok4 && !ok {
			t.Errorf("%q is an IPv4 address but its beginning %q is refused", s, s[:k])
		}
		if _, ok := ipv6([]byte(s[:k]), true); ok6 && !ok {
			t.Errorf("%q is an IPv6 address but its beginning %q is refused", s, s[:k])
		}
	}
}

var errZone = &invalidError{"zone"}

func TestAddrPrefixRefusals(t *testing.T) {
	for _, s := range []string{"01", "256", "1.2.3.4.", "1..", ".", "1.2.3.4.5", ":", "a"} {
		if _, ok := ipv4([]byte(s), true); ok {
			t.Errorf("%q accepted as the beginning of an IPv4 address", s)
		}
	}
	for _, s := range []string{":::", "1::2::", "12345", "1:2:3:4:5:6:7:8:", "1::2:3:4:5:6:7:", "1:2:3:4:5:1.", "g", ".", "1.", "::256.", "::1.2.3.4.", "::1.2.3.4:"} {
		if _, ok := ipv6([]byte(s), true); ok {
			t.Errorf("%q accepted as the beginning of an IPv6 address", s)
		}
	}
}

func TestParsePort(t *testing.T) {
	for s, want := range map[string]int{"0": 0, "1": 1, "80": 80, "65535": 65535, "": -1, "00": -1, "01": -1, "65536": -1, "99999": -1, "100000": -1, "-1": -1, "1a": -1} {
		p, ok := parsePort([]byte(s), false)
		if (want < 0) == ok || (ok && int(p) != want) {
			t.Errorf("parsePort(%q) = %d, %v; want %d", s, p, ok, want)
		}
	}
}
