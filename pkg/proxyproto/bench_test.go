package proxyproto

import "testing"

func BenchmarkParseV1(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"TCP4", "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"},
		{"TCP6", "PROXY TCP6 2001:db8:85a3::8a2e:370:7334 2001:db8::1 56324 443\r\n"},
		{"UNKNOWN", "PROXY UNKNOWN\r\n"},
	} {
		in := []byte(c.in)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, _, err := Parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseV2(b *testing.B) {
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"INET", v2(0x21, 0x11, inet("192.168.0.1", "192.168.0.11", 56324, 443))},
		{"INET6", v2(0x21, 0x21, inet6("2001:db8::1", "2001:db8::2", 56324, 443))},
		{"INET6+TLVs", v2(0x21, 0x21, inet6("2001:db8::1", "2001:db8::2", 56324, 443), tlv(0x01, "h2"), tlv(0x02, "example.com"), tlv(0x05, repeat("u", 64)))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				if _, _, err := Parse(c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendV2(b *testing.B) {
	for _, c := range []struct{ name, src, dst string }{
		{"INET", "192.168.0.1:56324", "192.168.0.11:443"},
		{"INET6", "[2001:db8::1]:56324", "[2001:db8::2]:443"},
	} {
		src, dst := ap(c.src), ap(c.dst)
		buf := make([]byte, 0, 64)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendV2(buf[:0], Stream, src, dst)
			}
		})
	}
}

func BenchmarkAppendV1(b *testing.B) {
	for _, c := range []struct{ name, src, dst string }{
		{"TCP4", "192.168.0.1:56324", "192.168.0.11:443"},
		{"TCP6", "[2001:db8:85a3::8a2e:370:7334]:56324", "[2001:db8::1]:443"},
	} {
		src, dst := ap(c.src), ap(c.dst)
		buf := make([]byte, 0, MaxV1Length)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendV1(buf[:0], src, dst)
			}
		})
	}
}
