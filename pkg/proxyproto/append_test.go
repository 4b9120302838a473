package proxyproto

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestAppendV1(t *testing.T) {
	for _, c := range []struct {
		name     string
		src, dst netip.AddrPort
		want     string
	}{
		{"spec example", ap("192.168.0.1:56324"), ap("192.168.0.11:443"), "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"},
		{"IPv6", ap("[2001:db8::1]:1"), ap("[::1]:2"), "PROXY TCP6 2001:db8::1 ::1 1 2\r\n"},
		{"v4 to v6: both as IPv6", ap("192.0.2.1:1"), ap("[2001:db8::1]:2"), "PROXY TCP6 ::ffff:192.0.2.1 2001:db8::1 1 2\r\n"},
		{"v6 to v4: both as IPv6", ap("[2001:db8::1]:1"), ap("192.0.2.1:2"), "PROXY TCP6 2001:db8::1 ::ffff:192.0.2.1 1 2\r\n"},
		{"IPv4-mapped both: TCP4", ap("[::ffff:192.0.2.1]:1"), ap("[::ffff:198.51.100.1]:2"), "PROXY TCP4 192.0.2.1 198.51.100.1 1 2\r\n"},
		{"IPv4-mapped and IPv4: TCP4", ap("[::ffff:192.0.2.1]:1"), ap("198.51.100.1:2"), "PROXY TCP4 192.0.2.1 198.51.100.1 1 2\r\n"},
		{"zone dropped", ap("[fe80::1%eth0]:1"), ap("[fe80::2%eth0]:2"), "PROXY TCP6 fe80::1 fe80::2 1 2\r\n"},
		{"zero ports", ap("0.0.0.0:0"), ap("0.0.0.0:0"), "PROXY TCP4 0.0.0.0 0.0.0.0 0 0\r\n"},
		{"longest", ap("[" + ffff + "]:65535"), ap("[" + ffff + "]:65535"), "PROXY TCP6 " + ffff + " " + ffff + " 65535 65535\r\n"},
		{"invalid source: UNKNOWN", netip.AddrPort{}, ap("192.0.2.1:2"), "PROXY UNKNOWN\r\n"},
		{"invalid destination: UNKNOWN", ap("192.0.2.1:2"), netip.AddrPort{}, "PROXY UNKNOWN\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := AppendV1([]byte("prefix"), c.src, c.dst)
			if string(got) != "prefix"+c.want {
				t.Fatalf("AppendV1 = %q, want %q", got, "prefix"+c.want)
			}
			if len(c.want) > MaxV1Length {
				t.Fatalf("%d bytes, over MaxV1Length", len(c.want))
			}
		})
	}
}

func TestAppendV2(t *testing.T) {
	sig := string(v2Signature[:])
	for _, c := range []struct {
		name     string
		tr       Transport
		src, dst netip.AddrPort
		want     string
	}{
		{"INET STREAM", Stream, ap("192.0.2.1:56324"), ap("198.51.100.2:443"),
			sig + "\x21\x11\x00\x0c" + "\xc0\x00\x02\x01" + "\xc6\x33\x64\x02" + "\xdc\x04" + "\x01\xbb"},
		{"INET DGRAM", Datagram, ap("10.0.0.1:53"), ap("10.0.0.2:5353"),
			sig + "\x21\x12\x00\x0c" + "\x0a\x00\x00\x01" + "\x0a\x00\x00\x02" + "\x00\x35" + "\x14\xe9"},
		{"INET6 STREAM", Stream, ap("[2001:db8::1]:1"), ap("[::1]:2"),
			sig + "\x21\x21\x00\x24" + "\x20\x01\x0d\xb8" + repeat("\x00", 11) + "\x01" + repeat("\x00", 15) + "\x01" + "\x00\x01\x00\x02"},
		{"v4 to v6: INET6 with the IPv4 side mapped", Datagram, ap("192.0.2.1:1"), ap("[::1]:2"),
			sig + "\x21\x22\x00\x24" + repeat("\x00", 10) + "\xff\xff\xc0\x00\x02\x01" + repeat("\x00", 15) + "\x01" + "\x00\x01\x00\x02"},
		{"IPv4-mapped both: INET", Stream, ap("[::ffff:192.0.2.1]:1"), ap("[::ffff:10.0.0.2]:2"),
			sig + "\x21\x11\x00\x0c" + "\xc0\x00\x02\x01" + "\x0a\x00\x00\x02" + "\x00\x01\x00\x02"},
		{"invalid address: PROXY UNSPEC", Stream, netip.AddrPort{}, ap("10.0.0.2:2"), sig + "\x21\x00\x00\x00"},
		{"unspec transport: PROXY UNSPEC", TransportUnspec, ap("10.0.0.1:1"), ap("10.0.0.2:2"), sig + "\x21\x00\x00\x00"},
		{"unknown transport: PROXY UNSPEC", 3, ap("10.0.0.1:1"), ap("10.0.0.2:2"), sig + "\x21\x00\x00\x00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := AppendV2([]byte("prefix"), c.tr, c.src, c.dst)
			if string(got) != "prefix"+c.want {
				t.Fatalf("AppendV2 =\n%q, want\n%q", got, "prefix"+c.want)
			}
		})
	}
	if got, want := AppendV2Local([]byte("p")), "p"+sig+"\x20\x00\x00\x00"; string(got) != want {
		t.Fatalf("AppendV2Local = %q, want %q", got, want)
	}
}

// TestRoundTrip: what Append* writes, Parse reads back: the same addresses
// (unmapped, without zone), the whole header and nothing more.
func TestRoundTrip(t *testing.T) {
	pairs := [][2]netip.AddrPort{
		{ap("192.0.2.1:56324"), ap("198.51.100.2:443")},
		{ap("0.0.0.0:0"), ap("255.255.255.255:65535")},
		{ap("[2001:db8::1]:1"), ap("[2001:db8::2]:2")},
		{ap("[::]:0"), ap("[" + ffff + "]:65535")},
		{ap("192.0.2.1:1"), ap("[2001:db8::1]:2")},
		{ap("[2001:db8::1]:1"), ap("192.0.2.1:2")},
		{ap("[::ffff:192.0.2.1]:1"), ap("[2001:db8::1]:2")},
		{ap("[::ffff:192.0.2.1]:1"), ap("[::ffff:192.0.2.2]:2")},
		{ap("[fe80::1%eth0]:1"), ap("[fe80::2%lo]:2")},
		{ap("[::ffff:0.0.0.0]:1"), ap("[::]:2")},
	}
	norm := func(a netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
	}
	for _, p := range pairs {
		src, dst := p[0], p[1]
		for _, c := range []struct {
			name string
			b    []byte
			tr   Transport
		}{
			{"v1", AppendV1(nil, src, dst), Stream},
			{"v2 stream", AppendV2(nil, Stream, src, dst), Stream},
			{"v2 dgram", AppendV2(nil, Datagram, src, dst), Datagram},
		} {
			h, n, err := Parse(append(c.b, "data"...))
			if err != nil || n != len(c.b) {
				t.Errorf("%s %v->%v: Parse(%q) = %d, %v; want %d", c.name, src, dst, c.b, n, err, len(c.b))
				continue
			}
			want := Header{Version: int(c.name[1] - '0'), Transport: c.tr, Src: norm(src), Dst: norm(dst)}
			if h != want {
				t.Errorf("%s %v->%v: %+v, want %+v", c.name, src, dst, h, want)
			}
		}
	}
	for _, b := range [][]byte{AppendV2Local(nil), AppendV1(nil, netip.AddrPort{}, netip.AddrPort{}), AppendV2(nil, Stream, netip.AddrPort{}, netip.AddrPort{})} {
		h, n, err := Parse(b)
		if err != nil || n != len(b) || !h.Local || h.Src.IsValid() || h.Dst.IsValid() || h.Transport != TransportUnspec {
			t.Errorf("Parse(%q) = %+v, %d, %v; want a Local header of %d bytes", b, h, n, err, len(b))
		}
	}
}

// TestNoAllocations: parsing (valid or not) and appending into a buffer
// with room do not allocate.
func TestNoAllocations(t *testing.T) {
	inputs := [][]byte{
		[]byte("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"),
		[]byte("PROXY TCP6 2001:db8::1 ::ffff:192.0.2.1 56324 443\r\n"),
		[]byte("PROXY UNKNOWN\r\n"),
		[]byte("PROXY TCP4 192.168.0.1 192.168"),
		[]byte("GET / HTTP/1.1\r\n"),
		[]byte("PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n"),
		v2(0x21, 0x21, inet6("2001:db8::1", "2001:db8::2", 1, 2), tlv(0x01, "h2")),
		v2(0x21, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2)),
		v2(0x21, 0x41),
	}
	for _, in := range inputs {
		if a := testing.AllocsPerRun(100, func() { Parse(in) }); a != 0 {
			t.Errorf("Parse(%q): %v allocations", in, a)
		}
	}
	buf := make([]byte, 0, MaxV1Length)
	src, dst := ap("[2001:db8::1]:56324"), ap("192.0.2.1:443")
	for name, f := range map[string]func(){
		"AppendV1":      func() { buf = AppendV1(buf[:0], src, dst) },
		"AppendV2":      func() { buf = AppendV2(buf[:0], Stream, src, dst) },
		"AppendV2Local": func() { buf = AppendV2Local(buf[:0]) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocations", name, a)
		}
	}
	if !bytes.HasPrefix(AppendV1(nil, src, dst), []byte("PROXY TCP6 ")) {
		t.Fatal("mixed families not sent as TCP6")
	}
}
