package clienthello

import (
	"bytes"
	"crypto/tls"
	"reflect"
	"strings"
	"testing"
)

// capture is a ClientHello a real client sent, and what Inspect must find.
type capture struct {
	name string
	wire []byte
	want Hello // WireLen aside
}

// goCaptures are hellos of Go's crypto/tls client: the default
// configuration (post-quantum key shares since Go 1.24), its curves named,
// ALPN, a long name, no name, an IP literal, a real ECH offer.
func goCaptures(t testing.TB) []capture {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".example"
	tls13 := []uint16{tls.VersionTLS13, tls.VersionTLS12}
	return []capture{
		{"go default", goHello(t, &tls.Config{ServerName: "api.example.com"}),
			Hello{ServerName: "api.example.com", Version: tls.VersionTLS12, SupportedVersions: tls13}},
		{"go X25519MLKEM768", goHello(t, &tls.Config{ServerName: "Web.Example.COM", CurvePreferences: []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256}}),
			Hello{ServerName: "web.example.com", Version: tls.VersionTLS12, SupportedVersions: tls13}},
		{"go ALPN", goHello(t, &tls.Config{ServerName: "h2.example.com", NextProtos: []string{"h2", "http/1.1"}}),
			Hello{ServerName: "h2.example.com", ALPN: []string{"h2", "http/1.1"}, Version: tls.VersionTLS12, SupportedVersions: tls13}},
		{"go long name", goHello(t, &tls.Config{ServerName: long}),
			Hello{ServerName: long, Version: tls.VersionTLS12, SupportedVersions: tls13}},
		{"go no SNI", goHello(t, &tls.Config{InsecureSkipVerify: true}),
			Hello{Version: tls.VersionTLS12, SupportedVersions: tls13}},
		{"go IP address, no SNI sent", goHello(t, &tls.Config{ServerName: "192.0.2.1"}),
			Hello{Version: tls.VersionTLS12, SupportedVersions: tls13}},
		{"go TLS 1.2 only", goHello(t, &tls.Config{ServerName: "old.example.com", MaxVersion: tls.VersionTLS12}),
			Hello{ServerName: "old.example.com", Version: tls.VersionTLS12, SupportedVersions: []uint16{tls.VersionTLS12}}},
		{"go ECH", goHello(t, &tls.Config{ServerName: "secret.example.com", MinVersion: tls.VersionTLS13, EncryptedClientHelloConfigList: echConfigList(t, "public.example.com"), NextProtos: []string{"h2"}}),
			Hello{ServerName: "public.example.com", ALPN: []string{"h2"}, ECH: true, Version: tls.VersionTLS12, SupportedVersions: []uint16{tls.VersionTLS13}}},
	}
}

func TestGoHellos(t *testing.T) {
	for _, c := range goCaptures(t) {
		t.Run(c.name, func(t *testing.T) { checkCapture(t, c) })
	}
}

func TestOpenSSLHellos(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want Hello
	}{
		{"servername", []string{"-servername", "x"}, Hello{ServerName: "x"}},
		{"servername and alpn", []string{"-servername", "api.example.com", "-alpn", "h2,http/1.1"}, Hello{ServerName: "api.example.com", ALPN: []string{"h2", "http/1.1"}}},
		{"noservername", []string{"-noservername"}, Hello{}},
		{"IP literal, ignored", []string{"-servername", "192.0.2.1"}, Hello{}},
		{"tls1_2", []string{"-servername", "old.example.com", "-tls1_2"}, Hello{ServerName: "old.example.com"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wire := openSSLHello(t, c.args...)
			_, h := Inspect(wire)
			c.want.Version = tls.VersionTLS12
			if c.name != "tls1_2" {
				// OpenSSL's own list: whatever its build enables, TLS 1.3 first.
				if len(h.SupportedVersions) == 0 || h.SupportedVersions[0] != tls.VersionTLS13 {
					t.Errorf("supported versions %x, want TLS 1.3 first", h.SupportedVersions)
				}
				c.want.SupportedVersions = h.SupportedVersions
			}
			checkCapture(t, capture{c.name, wire, c.want})
		})
	}
}

// checkCapture checks Inspect on a capture: every proper prefix needs
// more, the whole is the hello, and so is the same message cut into
// records of any size or followed by more bytes.
func checkCapture(t *testing.T, c capture) {
	t.Helper()
	for k := range len(c.wire) {
		if v, h := Inspect(c.wire[:k]); v != NeedMore || !reflect.DeepEqual(h, Hello{}) {
			t.Fatalf("first %d of %d bytes: %v %+v, want need_more", k, len(c.wire), v, h)
		}
	}
	want := c.want
	want.WireLen = len(c.wire)
	expect(t, c.wire, want)
	msg := message(t, c.wire)
	for _, size := range []int{1, 2, 3, 4, 5, 7, 100, 512, len(msg) - 1, maxRecordPayload} {
		wire := records(msg, size)
		want.WireLen = len(wire)
		expect(t, wire, want)
		expect(t, append(wire[:len(wire):len(wire)], 20, 3, 3, 0, 1, 1), want) // and a change_cipher_spec
	}
	wire := records(msg, 1)
	for k := range len(wire) {
		if v, _ := Inspect(wire[:k]); v != NeedMore {
			t.Fatalf("in 1-byte records, first %d of %d bytes: %v", k, len(wire), v)
		}
	}
}

// expect checks that Inspect finds want in wire and leaves wire as it was.
func expect(t *testing.T, wire []byte, want Hello) {
	t.Helper()
	before := bytes.Clone(wire)
	v, h := Inspect(wire)
	if v != Complete || !reflect.DeepEqual(h, want) {
		t.Fatalf("%d bytes: %v %+v, want complete %+v", len(wire), v, h, want)
	}
	if !bytes.Equal(wire, before) {
		t.Fatal("Inspect changed its input")
	}
}

func TestNotTLS(t *testing.T) {
	for _, in := range []string{
		"GET / HTTP/1.1\r\n",
		"SSH-2.0-OpenSSH_9.6\r\n",
		"EHLO mail.example.com\r\n",
		"PROXY TCP4 192.0.2.1 192.0.2.2 1234 443\r\n",
		"\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10", // SSLv2-compatible hello
		"\x16\x02\x00",                                 // handshake type, major version 2
		"\x16\x04\x01\x00\x30",                         // handshake type, major version 4
		"\x15\x02",                                     // alert type, major version 2
		"\x00",
		"\xff",
	} {
		if v, _ := Inspect([]byte(in)); v != NotTLS {
			t.Errorf("%q: %v, want not_tls", in, v)
		}
	}
}

func TestMalformed(t *testing.T) {
	hello := message(t, goHello(t, &tls.Config{ServerName: "api.example.com", NextProtos: []string{"h2"}}))
	cases := map[string][]byte{
		"alert first":                         []byte("\x15\x03\x03\x00\x02\x02\x28"),
		"change_cipher_spec first":            []byte("\x14\x03\x03\x00\x01\x01"),
		"application data first":              []byte("\x17\x03\x03\x00\x10"),
		"empty record":                        []byte("\x16\x03\x01\x00\x00"),
		"record over 2^14":                    []byte("\x16\x03\x01\x40\x01"),
		"server hello":                        []byte("\x16\x03\x03\x00\x30\x02\x00\x00\x2c"),
		"hello shorter than its fixed fields": records([]byte("\x01\x00\x00\x28"), 4),
		"alert between fragments":             append(records(hello[:100], 100), "\x15\x03\x03\x00\x02\x02\x28"...),
		"major 2 between fragments":           append(records(hello[:100], 100), "\x16\x02\x01\x00\x02"...),
	}
	for name, in := range cases {
		if v, _ := Inspect(in); v != Malformed {
			t.Errorf("%s: %v, want malformed", name, v)
		}
	}
}

// TestMalformedBody edits a real hello's body and checks each edit is
// refused once the whole message is in, and needs more before.
func TestMalformedBody(t *testing.T) {
	base := helloBuilder{version: tls.VersionTLS12, sessionID: make([]byte, 32), suites: []byte{0x13, 0x01}, compression: []byte{0}, exts: true}
	good := base.with(ext(extServerName, sni(0, "api.example.com")), ext(extALPN, alpn("h2")))
	expect(t, records(good, 1<<14), Hello{ServerName: "api.example.com", ALPN: []string{"h2"}, Version: tls.VersionTLS12, WireLen: len(good) + recordHeaderLen})
	bad := map[string][]byte{
		"session id of 33":         helloBuilder{version: 0x0303, sessionID: make([]byte, 33), suites: []byte{0x13, 0x01}, compression: []byte{0}}.with(ext(extALPN, alpn("h2"))),
		"no cipher suites":         helloBuilder{version: 0x0303, compression: []byte{0}}.with(ext(extALPN, alpn("h2"))),
		"odd cipher suites":        helloBuilder{version: 0x0303, suites: []byte{0x13, 0x01, 0x13}, compression: []byte{0}}.with(ext(extALPN, alpn("h2"))),
		"no compression methods":   helloBuilder{version: 0x0303, suites: []byte{0x13, 0x01, 0x13, 0x02}}.with(ext(extALPN, alpn("h2"))),
		"extensions block short":   shortExtensions(base.with(ext(extALPN, alpn("h2")))),
		"bytes after extensions":   append(base.with(ext(extALPN, alpn("h2"))), 0),
		"duplicate extension":      base.with(ext(extALPN, alpn("h2")), ext(extALPN, alpn("h2"))),
		"duplicate unknown":        base.with(ext(0x1a1a, nil), ext(0x1a1a, nil)),
		"empty server_name":        base.with(ext(extServerName, nil)),
		"empty server name list":   base.with(ext(extServerName, []byte{0, 0})),
		"two host_names":           base.with(ext(extServerName, sni(0, "a.example", 0, "b.example"))),
		"empty host_name":          base.with(ext(extServerName, sni(0, ""))),
		"server name list overrun": base.with(ext(extServerName, []byte{0, 9, 0, 0, 1, 'a'})),
		"host name with a space":   base.with(ext(extServerName, sni(0, "a b.example"))),
		"host name with a NUL":     base.with(ext(extServerName, sni(0, "a\x00.example"))),
		"host name of UTF-8":       base.with(ext(extServerName, sni(0, "bücher.example"))),
		"empty label":              base.with(ext(extServerName, sni(0, "a..example"))),
		"two trailing dots":        base.with(ext(extServerName, sni(0, "a.example.."))),
		"a lone dot":               base.with(ext(extServerName, sni(0, "."))),
		"leading dot":              base.with(ext(extServerName, sni(0, ".example"))),
		"label of 64":              base.with(ext(extServerName, sni(0, strings.Repeat("a", 64)+".example"))),
		"name of 254":              base.with(ext(extServerName, sni(0, strings.Repeat(strings.Repeat("a", 62)+".", 4)+"ab"))),
		"empty ALPN":               base.with(ext(extALPN, nil)),
		"empty ALPN list":          base.with(ext(extALPN, []byte{0, 0})),
		"empty protocol":           base.with(ext(extALPN, alpn("h2", ""))),
		"ALPN overrun":             base.with(ext(extALPN, []byte{0, 3, 5, 'h', '2'})),
		"ALPN trailing bytes":      base.with(ext(extALPN, append(alpn("h2"), 0))),
		"empty supported_versions": base.with(ext(extSupportedVersions, []byte{0})),
		"odd supported_versions":   base.with(ext(extSupportedVersions, []byte{3, 3, 4, 3})),
		"extension overrun":        append(base.with(), 0, 16, 0, 9, 0),
	}
	for name, msg := range bad {
		wire := records(fixLength(msg), 1<<14)
		if v, _ := Inspect(wire); v != Malformed {
			t.Errorf("%s: %v, want malformed", name, v)
		}
		if v, _ := Inspect(wire[:len(wire)-1]); v != NeedMore {
			t.Errorf("%s, all but its last byte: %v, want need_more", name, v)
		}
	}
}

// shortExtensions makes msg's extension block claim a byte less than it
// holds, leaving one byte after it.
func shortExtensions(msg []byte) []byte {
	i := handshakeHeaderLen + 2 + 32 + 1 + int(msg[handshakeHeaderLen+2+32]) // past the session id
	i += 2 + (int(msg[i])<<8 | int(msg[i+1]))                                // past the suites
	i += 1 + int(msg[i])                                                     // past the compression methods
	n := int(msg[i])<<8 | int(msg[i+1])
	msg[i], msg[i+1] = byte((n-1)>>8), byte(n-1)
	return msg
}

func TestServerNames(t *testing.T) {
	base := helloBuilder{version: tls.VersionTLS12, suites: []byte{0x13, 0x01}, compression: []byte{0}, exts: true}
	for in, want := range map[string]string{
		"API.Example.COM":              "api.example.com",
		"api.example.com.":             "api.example.com",
		"x":                            "x",
		"_acme-challenge.ex-1.example": "_acme-challenge.ex-1.example",
		"192.0.2.1":                    "",
		"192.0.2.1.":                   "",
		"2001:db8::1":                  "",
		"::ffff:192.0.2.1":             "",
		strings.Repeat(strings.Repeat("a", 62)+".", 4) + "a": strings.Repeat(strings.Repeat("a", 62)+".", 4) + "a",
	} {
		msg := base.with(ext(extServerName, sni(0, in)))
		expect(t, records(msg, 1<<14), Hello{ServerName: want, Version: tls.VersionTLS12, WireLen: len(msg) + recordHeaderLen})
	}
	// Entries of other name types are skipped, before and after a host_name.
	msg := base.with(ext(extServerName, sni(7, "opaque", 0, "api.example.com", 9, "more")))
	expect(t, records(msg, 1<<14), Hello{ServerName: "api.example.com", Version: tls.VersionTLS12, WireLen: len(msg) + recordHeaderLen})
	msg = base.with(ext(extServerName, sni(7, "opaque")))
	expect(t, records(msg, 1<<14), Hello{Version: tls.VersionTLS12, WireLen: len(msg) + recordHeaderLen})
}

func TestNoExtensions(t *testing.T) {
	msg := helloBuilder{version: tls.VersionTLS10, suites: []byte{0x00, 0x2f}, compression: []byte{0}}.with()
	expect(t, records(msg, 1<<14), Hello{Version: tls.VersionTLS10, WireLen: len(msg) + recordHeaderLen})
	msg = helloBuilder{version: tls.VersionTLS12, suites: []byte{0x00, 0x2f}, compression: []byte{0}, exts: true}.with()
	expect(t, records(msg, 1<<14), Hello{Version: tls.VersionTLS12, WireLen: len(msg) + recordHeaderLen})
}

func TestSizes(t *testing.T) {
	msg := message(t, goHello(t, &tls.Config{ServerName: "big.example.com"}))
	want := Hello{ServerName: "big.example.com", Version: tls.VersionTLS12, SupportedVersions: []uint16{tls.VersionTLS13, tls.VersionTLS12}}

	biggest := padded(t, msg, MaxHelloLen)
	want.WireLen = MaxHelloLen + recordHeaderLen
	expect(t, records(biggest, maxRecordPayload), want)
	// The most records of it MaxBytes leaves room for: of 81 bytes.
	wire := records(biggest, 81)
	want.WireLen = len(wire)
	expect(t, wire, want)
	if v, _ := Inspect(records(biggest, 80)); v != TooLarge {
		t.Errorf("16 KiB hello in 80-byte records (%d bytes): %v, want too_large", len(records(biggest, 80)), v)
	}

	// One byte more than a record carries: too large as soon as the
	// handshake header says so.
	over := records(padded(t, msg, MaxHelloLen+1), maxRecordPayload)
	for _, n := range []int{recordHeaderLen + handshakeHeaderLen, 100, len(over)} {
		if v, _ := Inspect(over[:n]); v != TooLarge {
			t.Errorf("hello of MaxHelloLen+1, first %d bytes: %v, want too_large", n, v)
		}
	}
	if v, _ := Inspect(over[:recordHeaderLen+handshakeHeaderLen-1]); v != NeedMore {
		t.Errorf("hello of MaxHelloLen+1, before its length: %v, want need_more", v)
	}

	// A 16 KiB hello in 1-byte records: too large once the record headers
	// so far and the bytes yet to come cannot fit, after 204 records and
	// long before MaxBytes have come.
	tiny := records(biggest, 1)
	if v, _ := Inspect(tiny[:204*6]); v != TooLarge {
		t.Errorf("16 KiB hello in 1-byte records, first 204 records: %v, want too_large", v)
	}
	if v, _ := Inspect(tiny[:203*6]); v != NeedMore {
		t.Errorf("16 KiB hello in 1-byte records, first 203 records: %v, want need_more", v)
	}

	// In 1-byte records, 6 bytes a byte: a hello of 2,901 bytes fits in
	// MaxBytes, one of 2,902 does not.
	fits := records(padded(t, msg, MaxBytes/6), 1)
	want.WireLen = len(fits)
	expect(t, fits, want)
	if v, _ := Inspect(records(padded(t, msg, MaxBytes/6+1), 1)); v != TooLarge {
		t.Errorf("hello of %d bytes in 1-byte records: %v, want too_large", MaxBytes/6+1, v)
	}
}

func TestVerdictStrings(t *testing.T) {
	for v, want := range map[Verdict]string{NeedMore: "need_more", Complete: "complete", NotTLS: "not_tls", Malformed: "malformed", TooLarge: "too_large", 99: "unknown"} {
		if v.String() != want {
			t.Errorf("%d: %q, want %q", int(v), v.String(), want)
		}
	}
}
