package ipset

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

func prefixes(ss ...string) []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range ss {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}

func TestContains(t *testing.T) {
	s := New(prefixes("10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "fe80::/10"))
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"10.0.0.0", true}, {"10.255.255.255", true}, {"11.0.0.0", false}, {"9.255.255.255", false},
		{"192.0.2.7", true}, {"192.0.2.6", false}, {"192.0.2.8", false},
		{"::ffff:10.1.2.3", true}, // mapped: its IPv4 address
		{"2001:db8:ffff::1", true}, {"2001:db9::", false}, {"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", false},
		{"fe80::1%eth0", true}, // a zone does not take an address out of a deny list
		{"::a00:1", false},     // 10.0.0.1's bits as IPv6: another family
	} {
		if got := s.Contains(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Contains(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if s.Contains(netip.Addr{}) {
		t.Error("the invalid Addr is in the set")
	}
}

func TestMappedNetworkIsItsIPv4Network(t *testing.T) {
	s := New(prefixes("::ffff:10.0.0.0/104"))
	for _, a := range []string{"10.1.2.3", "::ffff:10.1.2.3"} {
		if !s.Contains(netip.MustParseAddr(a)) {
			t.Errorf("::ffff:10.0.0.0/104 does not hold %s", a)
		}
	}
	if New(prefixes("::/0")).Contains(netip.MustParseAddr("10.1.2.3")) {
		t.Error("::/0 holds an IPv4 client: an IPv6 network shorter than /96 is not an IPv4 one")
	}
}

func TestWholeFamiliesAndEmpty(t *testing.T) {
	all := New(prefixes("0.0.0.0/0", "::/0"))
	for _, a := range []string{"0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		if !all.Contains(netip.MustParseAddr(a)) {
			t.Errorf("0.0.0.0/0 + ::/0 does not hold %s", a)
		}
	}
	var empty Set
	if !empty.Empty() || empty.Contains(netip.MustParseAddr("10.0.0.1")) {
		t.Error("the zero Set is not empty")
	}
	if s := New(nil); !s.Empty() {
		t.Error("New(nil) is not empty")
	}
	if New(prefixes("10.0.0.0/8")).Empty() {
		t.Error("a set of one network is empty")
	}
}

func TestMergesOverlappingAndAdjacent(t *testing.T) {
	s := New(prefixes("10.0.0.0/25", "10.0.0.128/25", "10.0.0.5/32", "10.0.1.0/24", "10.0.3.0/24",
		"2001:db8::/64", "2001:db8:0:1::/64", "::/128", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"))
	// 10.0.0.0-10.0.1.255, 10.0.3.0/24; 2001:db8::/63, ::, the last address.
	if got := s.Ranges(); got != 5 {
		t.Fatalf("%d ranges, want 5", got)
	}
	if s.Contains(netip.MustParseAddr("10.0.2.0")) || !s.Contains(netip.MustParseAddr("10.0.1.255")) {
		t.Error("the gap between 10.0.1.255 and 10.0.3.0 is wrong")
	}
}

// randomPrefix draws networks of every length, often nested or adjacent,
// some of them written as IPv4-mapped IPv6.
func randomPrefix(r *rand.Rand) netip.Prefix {
	if r.IntN(6) == 0 {
		b := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))}).As16()
		p, _ := netip.AddrFrom16(b).Prefix(96 + r.IntN(33))
		return p
	}
	if r.IntN(2) == 0 {
		b := [4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))}
		p, _ := netip.AddrFrom4(b).Prefix(r.IntN(33))
		return p
	}
	b := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(4)), 0, 0, 0, byte(r.IntN(256))}
	b[15] = byte(r.IntN(256))
	p, _ := netip.AddrFrom16(b).Prefix(r.IntN(129))
	return p
}

func randomAddr(r *rand.Rand) netip.Addr {
	switch r.IntN(3) {
	case 0:
		return netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
	case 1:
		return netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), 0, 1})
	}
	b := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(4)), 0, 0, 0, byte(r.IntN(256))}
	b[15] = byte(r.IntN(256))
	return netip.AddrFrom16(b)
}

// inScan is the reference: a linear scan with netip.Prefix.Contains, with
// mapped networks and addresses taken as IPv4 and zones dropped.
func inScan(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range ps {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Against a linear scan, over random networks and addresses (mapped ones
// and zoned ones among them).
func TestMatchesALinearScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		ps := make([]netip.Prefix, r.IntN(40))
		for i := range ps {
			ps[i] = randomPrefix(r)
		}
		s := New(ps)
		for range 300 {
			a := randomAddr(r)
			switch r.IntN(8) {
			case 0:
				a = netip.AddrFrom16(a.As16()) // mapped, when a is IPv4
			case 1:
				if a.Is6() {
					a = a.WithZone("eth0")
				}
			}
			want := inScan(ps, a)
			if got := s.Contains(a); got != want {
				t.Fatalf("round %d: Contains(%s) = %v, a scan of %v says %v", round, a, got, ps, want)
			}
		}
	}
}

// benchmarkContains: a blocklist of n networks (IPv4 /24s and /32s, IPv6
// /48s and /128s, spread over the address space) and clients that are
// mostly in none of them, the usual case for a deny list.
func benchmarkContains(b *testing.B, n int) {
	r := rand.New(rand.NewPCG(3, 4))
	ps := make([]netip.Prefix, n)
	for i := range ps {
		var a netip.Addr
		bits := 0
		if i%2 == 0 {
			a = netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
			bits = []int{24, 32}[r.IntN(2)]
		} else {
			var x [16]byte
			for j := range x {
				x[j] = byte(r.IntN(256))
			}
			a = netip.AddrFrom16(x)
			bits = []int{48, 128}[r.IntN(2)]
		}
		ps[i], _ = a.Prefix(bits)
	}
	addrs := make([]netip.Addr, 1024)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
	}
	b.Run("set", func(b *testing.B) {
		s := New(ps)
		i := 0
		for b.Loop() {
			s.Contains(addrs[i&1023])
			i++
		}
	})
	b.Run("scan", func(b *testing.B) {
		i := 0
		for b.Loop() {
			a := addrs[i&1023]
			for _, p := range ps {
				if p.Contains(a) {
					break
				}
			}
			i++
		}
	})
}

func BenchmarkContains10(b *testing.B)    { benchmarkContains(b, 10) }
func BenchmarkContains10000(b *testing.B) { benchmarkContains(b, 10000) }
