package proxyproto

import (
	"errors"
	"strings"
	"testing"
)

var validCases = []struct {
	name string
	in   string // the header, possibly followed by application data
	n    int    // the header's length
	want Header
}{
	{
		name: "spec v1 example before an HTTP request",
		in:   "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\nHost: 192.168.0.11\r\n\r\n",
		n:    len("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"),
		want: Header{Version: 1, Transport: Stream, Src: ap("192.168.0.1:56324"), Dst: ap("192.168.0.11:443")},
	},
	{
		name: "spec v1 longest TCP4 (56 bytes)",
		in:   "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n",
		n:    56,
		want: Header{Version: 1, Transport: Stream, Src: ap("255.255.255.255:65535"), Dst: ap("255.255.255.255:65535")},
	},
	{
		name: "spec v1 longest TCP6 (104 bytes)",
		in:   "PROXY TCP6 " + ffff + " " + ffff + " 65535 65535\r\n",
		n:    104,
		want: Header{Version: 1, Transport: Stream, Src: ap("[" + ffff + "]:65535"), Dst: ap("[" + ffff + "]:65535")},
	},
	{
		name: "spec v1 UNKNOWN short form (15 bytes)",
		in:   "PROXY UNKNOWN\r\n",
		n:    15,
		want: Header{Version: 1, Local: true},
	},
	{
		name: "spec v1 worst case UNKNOWN with addresses (107 bytes)",
		in:   "PROXY UNKNOWN " + ffff + " " + ffff + " 65535 65535\r\n",
		n:    107,
		want: Header{Version: 1, Local: true},
	},
	{
		name: "v1 UNKNOWN with anything before the CRLF",
		in:   "PROXY UNKNOWN \x00 not even \t an address \xff\r\ndata",
		n:    len("PROXY UNKNOWN \x00 not even \t an address \xff\r\n"),
		want: Header{Version: 1, Local: true},
	},
	{
		name: "v1 UNKNOWN with a space and nothing else",
		in:   "PROXY UNKNOWN \r\n",
		n:    16,
		want: Header{Version: 1, Local: true},
	},
	{
		name: "v1 TCP4 zero ports and addresses",
		in:   "PROXY TCP4 0.0.0.0 0.0.0.0 0 0\r\n",
		n:    32,
		want: Header{Version: 1, Transport: Stream, Src: ap("0.0.0.0:0"), Dst: ap("0.0.0.0:0")},
	},
	{
		name: "v1 TCP6 compressed",
		in:   "PROXY TCP6 2001:db8::1 ::1 40000 443\r\n",
		n:    38,
		want: Header{Version: 1, Transport: Stream, Src: ap("[2001:db8::1]:40000"), Dst: ap("[::1]:443")},
	},
	{
		name: "v1 TCP6 upper case hex",
		in:   "PROXY TCP6 2001:DB8:0:0:0:0:0:AB ::FFFF:A 1 2\r\n",
		n:    len("PROXY TCP6 2001:DB8:0:0:0:0:0:AB ::FFFF:A 1 2\r\n"),
		want: Header{Version: 1, Transport: Stream, Src: ap("[2001:db8::ab]:1"), Dst: ap("[::ffff:a]:2")},
	},
	{
		name: "v1 TCP6 IPv4-mapped source, dotted, is unmapped",
		in:   "PROXY TCP6 ::ffff:192.0.2.1 2001:db8::1 1234 80\r\n",
		n:    len("PROXY TCP6 ::ffff:192.0.2.1 2001:db8::1 1234 80\r\n"),
		want: Header{Version: 1, Transport: Stream, Src: ap("192.0.2.1:1234"), Dst: ap("[2001:db8::1]:80")},
	},
	{
		name: "v1 TCP6 IPv4-mapped both, hex, are unmapped",
		in:   "PROXY TCP6 ::ffff:c000:201 0:0:0:0:0:ffff:c633:6401 1 2\r\n",
		n:    len("PROXY TCP6 ::ffff:c000:201 0:0:0:0:0:ffff:c633:6401 1 2\r\n"),
		want: Header{Version: 1, Transport: Stream, Src: ap("192.0.2.1:1"), Dst: ap("198.51.100.1:2")},
	},
	{
		name: "v1 TCP6 longest dotted tail (45 characters)",
		in:   "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255 ::1 1 2\r\n",
		n:    len("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255 ::1 1 2\r\n"),
		want: Header{Version: 1, Transport: Stream, Src: ap("[" + ffff + "]:1"), Dst: ap("[::1]:2")},
	},
	{
		name: "v2 INET STREAM",
		in:   string(v2(0x21, 0x11, inet("192.0.2.1", "198.51.100.2", 56324, 443))) + "hello",
		n:    28,
		want: Header{Version: 2, Transport: Stream, Src: ap("192.0.2.1:56324"), Dst: ap("198.51.100.2:443")},
	},
	{
		name: "v2 INET DGRAM",
		in:   string(v2(0x21, 0x12, inet("10.0.0.1", "10.0.0.2", 53, 5353))),
		n:    28,
		want: Header{Version: 2, Transport: Datagram, Src: ap("10.0.0.1:53"), Dst: ap("10.0.0.2:5353")},
	},
	{
		name: "v2 INET6 STREAM",
		in:   string(v2(0x21, 0x21, inet6("2001:db8::1", "2001:db8::2", 1, 65535))),
		n:    52,
		want: Header{Version: 2, Transport: Stream, Src: ap("[2001:db8::1]:1"), Dst: ap("[2001:db8::2]:65535")},
	},
	{
		name: "v2 INET6 DGRAM",
		in:   string(v2(0x21, 0x22, inet6("::1", "fe80::1", 0, 0))),
		n:    52,
		want: Header{Version: 2, Transport: Datagram, Src: ap("[::1]:0"), Dst: ap("[fe80::1]:0")},
	},
	{
		name: "v2 INET6 IPv4-mapped are unmapped",
		in:   string(v2(0x21, 0x21, inet6("::ffff:192.0.2.1", "2001:db8::2", 7, 8))),
		n:    52,
		want: Header{Version: 2, Transport: Stream, Src: ap("192.0.2.1:7"), Dst: ap("[2001:db8::2]:8")},
	},
	{
		name: "v2 INET STREAM with TLVs (skipped)",
		in: string(v2(0x21, 0x11, inet("192.0.2.1", "198.51.100.2", 1, 2),
			tlv(0x01, "h2"), tlv(0x02, "example.com"), tlv(0x04, ""), tlv(0x05, repeat("u", 128)),
			tlv(0x20, "\x01\x00\x00\x00\x00"+string(tlv(0x21, "TLSv1.3"))))) + "data",
		n:    28 + 5 + 14 + 3 + 131 + 3 + 5 + 10,
		want: Header{Version: 2, Transport: Stream, Src: ap("192.0.2.1:1"), Dst: ap("198.51.100.2:2")},
	},
	{
		name: "v2 INET6 DGRAM with a TLV (skipped)",
		in:   string(v2(0x21, 0x22, inet6("2001:db8::1", "2001:db8::2", 1, 2), tlv(0xEA, "\x01vpce-0123"))),
		n:    52 + 3 + 10,
		want: Header{Version: 2, Transport: Datagram, Src: ap("[2001:db8::1]:1"), Dst: ap("[2001:db8::2]:2")},
	},
	{
		name: "v2 longest accepted header (MaxV2Length), TLVs to the end",
		in:   string(v2(0x21, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2), tlv(0x04, repeat("\x00", 1024-12-3)))),
		n:    MaxV2Length,
		want: Header{Version: 2, Transport: Stream, Src: ap("1.2.3.4:1"), Dst: ap("5.6.7.8:2")},
	},
	{
		name: "v2 LOCAL, spec form (UNSPEC, no address)",
		in:   string(v2(0x20, 0x00)) + "\x00\x01",
		n:    16,
		want: Header{Version: 2, Local: true},
	},
	{
		name: "v2 LOCAL with an address block, ignored",
		in:   string(v2(0x20, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2))),
		n:    28,
		want: Header{Version: 2, Local: true},
	},
	{
		name: "v2 LOCAL ignores even an unknown family byte and odd bytes",
		in:   string(v2(0x20, 0xFF, []byte("xy"))),
		n:    18,
		want: Header{Version: 2, Local: true},
	},
	{
		name: "v2 PROXY UNSPEC: no usable address",
		in:   string(v2(0x21, 0x00)),
		n:    16,
		want: Header{Version: 2, Local: true},
	},
	{
		name: "v2 PROXY UNSPEC with bytes, ignored",
		in:   string(v2(0x21, 0x00, []byte{1, 2})),
		n:    18,
		want: Header{Version: 2, Local: true},
	},
	{
		name: "v2 PROXY INET with UNSPEC transport: no usable address",
		in:   string(v2(0x21, 0x10, inet("1.2.3.4", "5.6.7.8", 1, 2))),
		n:    28,
		want: Header{Version: 2, Local: true},
	},
	{
		name: "v2 PROXY UNIX STREAM: no usable address",
		in:   string(v2(0x21, 0x31, []byte(repeat("\x00", 216)))),
		n:    16 + 216,
		want: Header{Version: 2, Local: true},
	},
	{
		name: "v2 PROXY UNIX DGRAM with a TLV: no usable address",
		in:   string(v2(0x21, 0x32, []byte("/run/a.sock"+repeat("\x00", 97)+"/run/b.sock"+repeat("\x00", 97)), tlv(0x04, "pad"))),
		n:    16 + 216 + 6,
		want: Header{Version: 2, Local: true},
	},
}

var invalidCases = []struct {
	name  string
	in    string
	at    int    // shortest prefix already refused (0: len(in))
	error string // a part of the message
}{
	{"HTTP request", "GET / HTTP/1.1\r\n", 1, "bad signature"},
	{"TLS ClientHello", "\x16\x03\x01\x02\x00\x01", 1, "bad signature"},
	{"SSH banner", "SSH-2.0-OpenSSH_9.6\r\n", 1, "bad signature"},
	{"CRLF then text", "\r\nGET", 3, "bad signature"},
	{"lower case v1", "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n", 1, "bad signature"},
	{"PROXY misspelt", "PROXX TCP4", 5, "bad signature"},
	{"PROXY without its space", "PROXY\r\n", 6, "bad signature"},
	{"v1 unknown protocol", "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", 10, "unknown protocol"},
	{"v1 UDP4 is not v1", "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", 8, "unknown protocol"},
	{"v1 two spaces before the protocol", "PROXY  TCP4", 7, "unknown protocol"},
	{"v1 TCP44", "PROXY TCP44 1.2.3.4", 11, "unknown protocol"},
	{"v1 UNKNOWNX", "PROXY UNKNOWNX\r\n", 14, "unknown protocol"},
	{"v1 TCP4 and nothing", "PROXY TCP4\r\n", 11, "line ends before"},
	{"v1 two spaces between fields", "PROXY TCP4  1.2.3.4", 12, "one space"},
	{"v1 two spaces before a port", "PROXY TCP4 1.2.3.4 5.6.7.8  1 2\r\n", 28, "one space"},
	{"v1 too few fields", "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", 29, "line ends before"},
	{"v1 too few fields, no ports", "PROXY TCP4 1.2.3.4 5.6.7.8\r\n", 27, "line ends before"},
	{"v1 too many fields", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", 31, "want CRLF after the destination port"},
	{"v1 trailing space", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", 31, "want CRLF after the destination port"},
	{"v1 lone LF", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", 31, "lone CR or LF"},
	{"v1 lone CR", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rGET", 32, "lone CR or LF"},
	{"v1 LF CR", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n\r", 31, "lone CR or LF"},
	{"v1 UNKNOWN lone LF", "PROXY UNKNOWN\n", 14, "lone CR or LF"},
	{"v1 UNKNOWN lone CR", "PROXY UNKNOWN\rX", 15, "lone CR or LF"},
	{"v1 UNKNOWN LF inside", "PROXY UNKNOWN a\nb\r\n", 16, "lone CR or LF"},
	{"v1 UNKNOWN CR inside", "PROXY UNKNOWN a\rb\r\n", 17, "lone CR or LF"},
	{"v1 UNKNOWN without CRLF within 107 bytes", "PROXY UNKNOWN " + repeat("x", 200), MaxV1Length, "no CRLF within 107 bytes"},
	{"v1 UNKNOWN 108 bytes", "PROXY UNKNOWN " + repeat("x", 92) + "\r\n", MaxV1Length, "no CRLF within 107 bytes"},
	{"v1 leading zero in IPv4", "PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", 13, "bad source address"},
	{"v1 IPv4 octet over 255", "PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", 20, "bad source address"},
	{"v1 IPv4 with 3 octets", "PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", 17, "bad source address"},
	{"v1 IPv4 with 5 octets", "PROXY TCP4 1.2.3.4 5.6.7.8.9 1 2\r\n", 27, "bad destination address"},
	{"v1 IPv4 too long", "PROXY TCP4 1111.2222.3333.4444 5.6.7.8 1 2\r\n", 15, "bad source address"},
	{"v1 IPv6 in TCP4", "PROXY TCP4 ::1 ::1 1 2\r\n", 12, "bad source address"},
	{"v1 IPv4 in TCP6", "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", 13, "bad source address"},
	{"v1 IPv6 zone", "PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", 19, "bad source address"},
	{"v1 IPv6 two ellipses", "PROXY TCP6 1::2::3 ::1 1 2\r\n", 17, "bad source address"},
	{"v1 IPv6 nine groups", "PROXY TCP6 ::1 1:2:3:4:5:6:7:8:9 1 2\r\n", 31, "bad destination address"},
	{"v1 IPv6 group of 5 digits", "PROXY TCP6 00000", 16, "bad source address"},
	{"v1 IPv6 ellipsis and 8 groups", "PROXY TCP6 1:2:3:4::5:6:7:8 ::1 1 2\r\n", 26, "bad source address"},
	{"v1 IPv6 dotted tail too early", "PROXY TCP6 1:2:3:4:5:1.2.3.4 ::1 1 2\r\n", 23, "bad source address"},
	{"v1 IPv6 bad character", "PROXY TCP6 2001:db8::g", 22, "bad source address"},
	{"v1 port over 65535", "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", 32, "bad source port"},
	{"v1 port with a leading zero", "PROXY TCP4 1.2.3.4 5.6.7.8 1 080\r\n", 31, "bad destination port"},
	{"v1 port of 6 digits", "PROXY TCP4 1.2.3.4 5.6.7.8 1 100000\r\n", 35, "bad destination port"},
	{"v1 negative port", "PROXY TCP4 1.2.3.4 5.6.7.8 1 -1\r\n", 30, "bad destination port"},
	{"v1 port in hex", "PROXY TCP4 1.2.3.4 5.6.7.8 0x50 1\r\n", 29, "bad source port"},
	{"v2 signature wrong at its 5th byte", "\r\n\r\n\x01\r\nQUIT\n", 5, "bad signature"},
	{"v2 signature wrong at its last byte", "\r\n\r\n\x00\r\nQUIT\r", 12, "bad signature"},
	{"v2 version 1", string(v2(0x11, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2))), 13, "unknown version"},
	{"v2 version 3", string(v2(0x31, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2))), 13, "unknown version"},
	{"v2 command 2", string(v2(0x22, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2))), 13, "unknown command"},
	{"v2 command 15", string(v2(0x2F, 0x00)), 13, "unknown command"},
	{"v2 family 4", string(v2(0x21, 0x41, inet("1.2.3.4", "5.6.7.8", 1, 2))), 14, "unknown address family"},
	{"v2 family 15", string(v2(0x21, 0xF0)), 14, "unknown address family"},
	{"v2 transport 3", string(v2(0x21, 0x13, inet("1.2.3.4", "5.6.7.8", 1, 2))), 14, "unknown transport"},
	{"v2 longer than MaxV2Length", string(v2len(0x21, 0x11, 1025, nil)), 16, "over the limit"},
	{"v2 longest length field", string(v2len(0x20, 0x00, 65535, nil)), 16, "over the limit"},
	{"v2 INET block cut short", string(v2len(0x21, 0x11, 11, make([]byte, 11))), 16, "shorter than its address block"},
	{"v2 INET6 length of INET", string(v2(0x21, 0x21, inet("1.2.3.4", "5.6.7.8", 1, 2))), 16, "shorter than its address block"},
	{"v2 UNIX length of INET6", string(v2(0x21, 0x31, inet6("::1", "::1", 1, 2))), 16, "shorter than its address block"},
	{"v2 TLV without its length", string(v2(0x21, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2), []byte{0x04, 0x00})), 0, "TLV runs past"},
	{"v2 TLV longer than the header", string(v2(0x21, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2), []byte{0x01, 0x00, 0x05, 'h', '2'})), 0, "TLV runs past"},
	{"v2 second TLV cut", string(v2(0x21, 0x21, inet6("::1", "::1", 1, 2), tlv(0x01, "h2"), []byte{0x02, 0x00, 0x09, 'x'})), 0, "TLV runs past"},
}

func TestParseValid(t *testing.T) {
	for _, c := range validCases {
		t.Run(c.name, func(t *testing.T) {
			h, n, err := Parse([]byte(c.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if n != c.n {
				t.Errorf("n = %d, want %d", n, c.n)
			}
			if h != c.want {
				t.Errorf("header = %+v, want %+v", h, c.want)
			}
			if h.Src.Addr().Is4In6() || h.Dst.Addr().Is4In6() {
				t.Errorf("header %+v has an IPv4-mapped address", h)
			}
		})
	}
}

// TestParseEveryPrefixNeedsMore: every proper prefix of a valid header is
// ErrNeedMore, never a premature yes or no.
func TestParseEveryPrefixNeedsMore(t *testing.T) {
	for _, c := range validCases {
		t.Run(c.name, func(t *testing.T) {
			b := []byte(c.in)
			for k := 0; k < c.n; k++ {
				if _, _, err := Parse(b[:k]); err != ErrNeedMore {
					t.Fatalf("Parse(%q) = %v, want ErrNeedMore", b[:k], err)
				}
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, c := range invalidCases {
		t.Run(c.name, func(t *testing.T) {
			_, n, err := Parse([]byte(c.in))
			if !errors.Is(err, ErrInvalid) || n != 0 {
				t.Fatalf("Parse(%q) = %d, %v; want ErrInvalid", c.in, n, err)
			}
			if !strings.Contains(err.Error(), c.error) {
				t.Errorf("error %q does not say %q", err, c.error)
			}
		})
	}
}

// TestParseRefusesEarly: an invalid header is refused at the first byte
// that makes it so, and not before.
func TestParseRefusesEarly(t *testing.T) {
	for _, c := range invalidCases {
		t.Run(c.name, func(t *testing.T) {
			at := c.at
			if at == 0 {
				at = len(c.in)
			}
			b := []byte(c.in)
			if _, _, err := Parse(b[:at]); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.error) {
				t.Errorf("first %d bytes %q: %v, want it refused (%s)", at, b[:at], err, c.error)
			}
			if _, _, err := Parse(b[:at-1]); err != ErrNeedMore {
				t.Errorf("first %d bytes %q: %v, want ErrNeedMore", at-1, b[:at-1], err)
			}
		})
	}
}

func TestParseLimit(t *testing.T) {
	big := v2(0x21, 0x11, inet("1.2.3.4", "5.6.7.8", 1, 2), tlv(0x04, repeat("p", 4000)))
	if _, _, err := Parse(big); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Parse of a %d-byte header: %v, want ErrInvalid", len(big), err)
	}
	h, n, err := ParseLimit(big, len(big))
	if err != nil || n != len(big) || h.Src != ap("1.2.3.4:1") {
		t.Fatalf("ParseLimit(%d) = %+v, %d, %v", len(big), h, n, err)
	}
	if _, _, err := ParseLimit(big, len(big)-1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ParseLimit(%d): %v, want ErrInvalid", len(big)-1, err)
	}
	// v1 is bounded by MaxV1Length whatever the v2 limit.
	line := []byte("PROXY UNKNOWN " + repeat("x", 200))
	if _, _, err := ParseLimit(line, 65535+16); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ParseLimit on a long v1 line: %v, want ErrInvalid", err)
	}
}

// TestParseNeverWaitsPastMaxLength: whatever the bytes, once MaxLength of
// them are in Parse says yes or no.
func TestParseNeverWaitsPastMaxLength(t *testing.T) {
	for _, head := range []string{"PROXY UNKNOWN ", "PROXY TCP6 ", "PROXY TCP4 ", string(v2len(0x21, 0x11, 1024, nil))} {
		for _, fill := range []string{"x", "1", ":", "\x00"} {
			b := []byte(head + repeat(fill, MaxLength))
			if _, _, err := Parse(b); err == ErrNeedMore {
				t.Errorf("Parse(%q...) wants more after %d bytes", b[:20], len(b))
			}
		}
	}
}

func TestErrorsAreDistinct(t *testing.T) {
	if errors.Is(ErrNeedMore, ErrInvalid) || errors.Is(errSignature, ErrNeedMore) {
		t.Fatal("ErrNeedMore and ErrInvalid overlap")
	}
}

func TestTransportString(t *testing.T) {
	for tr, want := range map[Transport]string{TransportUnspec: "unspec", Stream: "stream", Datagram: "dgram", 7: "transport(7)"} {
		if got := tr.String(); got != want {
			t.Errorf("Transport(%d).String() = %q, want %q", tr, got, want)
		}
	}
}
