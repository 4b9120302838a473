package srclimit

import (
	"net/netip"
	"testing"
)

func TestIPv6SourceIsItsSlash64(t *testing.T) {
	// A host that rotates through addresses of its /64 is one source;
	// the next /64 is another.
	l := mustNew(t, Config{MaxConns: 2})
	a := netip.MustParseAddr("2001:db8:1:2::1")
	b := netip.MustParseAddr("2001:db8:1:2:ffff:ffff:ffff:fffe")
	other := netip.MustParseAddr("2001:db8:1:3::1")
	expect(t, l, a, 0, Admit)
	expect(t, l, b, 0, Admit)
	expect(t, l, netip.MustParseAddr("2001:db8:1:2:dead:beef::7"), 0, OverConns)
	expect(t, l, other, 0, Admit)
	if n := l.Sources(); n != 2 {
		t.Fatalf("Sources() = %d for two /64s, want 2", n)
	}
	l.Release(b) // any address of the /64 gives back its count
	expect(t, l, a, 0, Admit)
	expect(t, l, a, 0, OverConns)
}

func TestIPv4EachAddressByDefault(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 1})
	expect(t, l, netip.MustParseAddr("192.0.2.1"), 0, Admit)
	expect(t, l, netip.MustParseAddr("192.0.2.2"), 0, Admit)
	expect(t, l, netip.MustParseAddr("192.0.2.1"), 0, OverConns)
}

func TestConfiguredPrefixes(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 1, Rate: 1, IPv4Prefix: 24, IPv6Prefix: 128})
	expect(t, l, netip.MustParseAddr("192.0.2.1"), 0, Admit)
	expect(t, l, netip.MustParseAddr("::ffff:192.0.2.200"), 0, OverConns) // same /24, mapped or not
	expect(t, l, netip.MustParseAddr("192.0.3.1"), 0, Admit)
	expect(t, l, netip.MustParseAddr("2001:db8::1"), 0, Admit)
	expect(t, l, netip.MustParseAddr("2001:db8::2"), 0, Admit) // /128: each address alone
	expect(t, l, netip.MustParseAddr("2001:db8::1"), 0, OverConns)
	// The bucket is the prefix's too: 192.0.2.9 finds 192.0.2.1's
	// token taken once the cap is out of the way.
	l.Release(netip.MustParseAddr("192.0.2.9"))
	expect(t, l, netip.MustParseAddr("192.0.2.9"), 0, OverRate)
	expect(t, l, netip.MustParseAddr("192.0.2.9"), s1, Admit)
}

func TestPrefixBitsBounds(t *testing.T) {
	for _, tc := range []struct {
		v4, v6       int
		want4, want6 int
	}{
		{0, 0, 32, 64},
		{-1, -5, 32, 64},
		{8, 48, 8, 48},
		{33, 129, 32, 128},
	} {
		p := Config{MaxConns: 1, IPv4Prefix: tc.v4, IPv6Prefix: tc.v6}.params()
		if p.v4bits != tc.want4 || p.v6bits != tc.want6 {
			t.Errorf("IPv4Prefix %d, IPv6Prefix %d: bits %d and %d, want %d and %d", tc.v4, tc.v6, p.v4bits, p.v6bits, tc.want4, tc.want6)
		}
	}
	// Prefixes of one bit still tell sources apart by family: 10.0.0.1
	// and 2001:db8::1 fall in 0.0.0.0/1 and ::/1, two keys.
	l := mustNew(t, Config{MaxConns: 1, IPv4Prefix: 1, IPv6Prefix: 1})
	expect(t, l, netip.MustParseAddr("10.0.0.1"), 0, Admit)
	expect(t, l, netip.MustParseAddr("2001:db8::1"), 0, Admit)
	expect(t, l, netip.MustParseAddr("10.9.9.9"), 0, OverConns)
}
