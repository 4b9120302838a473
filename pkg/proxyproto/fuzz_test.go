package proxyproto

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// FuzzParse checks Parse on any bytes: no panic; an answer is one of a
// header, ErrNeedMore or ErrInvalid; a header's length is within bounds, its
// every proper prefix needs more, trailing bytes do not change it, and its
// addresses survive Append and Parse again; ErrNeedMore stays ErrNeedMore on
// every prefix and never comes past MaxLength; ErrInvalid stays ErrInvalid
// whatever follows.
func FuzzParse(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c.in))
	}
	for _, c := range invalidCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := Parse(b)
		switch {
		case err == nil:
			checkHeader(t, b, h, n)
		case err == ErrNeedMore:
			if n != 0 || h != (Header{}) {
				t.Fatalf("ErrNeedMore with %+v, %d", h, n)
			}
			if len(b) >= MaxLength {
				t.Fatalf("ErrNeedMore after %d bytes", len(b))
			}
			for _, k := range prefixes(len(b)) {
				if _, _, err := Parse(b[:k]); err != ErrNeedMore {
					t.Fatalf("%d bytes need more but their first %d: %v", len(b), k, err)
				}
			}
		case errors.Is(err, ErrInvalid):
			if n != 0 || h != (Header{}) {
				t.Fatalf("%v with %+v, %d", err, h, n)
			}
			for _, more := range []string{"\r\n", "\x00", " 1 2\r\n", strings.Repeat("\n", 2000)} {
				if _, _, err2 := Parse(append(b[:len(b):len(b)], more...)); err2 != err {
					t.Fatalf("%q: %v, but followed by %q: %v", b, err, more, err2)
				}
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}

func checkHeader(t *testing.T, b []byte, h Header, n int) {
	t.Helper()
	switch h.Version {
	case 1:
		if n < len("PROXY UNKNOWN\r\n") || n > MaxV1Length {
			t.Fatalf("v1 header of %d bytes", n)
		}
	case 2:
		if n < v2Fixed || n > MaxV2Length {
			t.Fatalf("v2 header of %d bytes", n)
		}
	default:
		t.Fatalf("version %d", h.Version)
	}
	if n > len(b) {
		t.Fatalf("header of %d bytes in %d", n, len(b))
	}
	for _, k := range prefixes(n) {
		if _, _, err := Parse(b[:k]); err != ErrNeedMore {
			t.Fatalf("%d-byte header, but its first %d bytes: %v", n, k, err)
		}
	}
	if h2, n2, err := Parse(append(b[:n:n], "trailing"...)); err != nil || h2 != h || n2 != n {
		t.Fatalf("header depends on what follows it: %+v %d, then %+v %d %v", h, n, h2, n2, err)
	}
	if h.Local {
		if h.Transport != TransportUnspec || h.Src.IsValid() || h.Dst.IsValid() {
			t.Fatalf("Local header with %+v", h)
		}
		return
	}
	for _, a := range []netip.AddrPort{h.Src, h.Dst} {
		if !a.IsValid() || a.Addr().Is4In6() || a.Addr().Zone() != "" {
			t.Fatalf("header address %v", a)
		}
	}
	if h.Transport != Stream && (h.Version == 1 || h.Transport != Datagram) {
		t.Fatalf("v%d transport %v", h.Version, h.Transport)
	}
	for _, out := range [][]byte{AppendV1(nil, h.Src, h.Dst), AppendV2(nil, h.Transport, h.Src, h.Dst)} {
		h2, n2, err := Parse(out)
		if err != nil || n2 != len(out) || h2.Src != h.Src || h2.Dst != h.Dst {
			t.Fatalf("%+v written as %q reads back as %+v, %d, %v", h, out, h2, n2, err)
		}
	}
}

// prefixes lists lengths below n to try: all of them when n is small, else
// the first and last 128 and a few in between.
func prefixes(n int) []int {
	var ks []int
	for k := 0; k < n; k++ {
		if k < 128 || n-k <= 128 || k%61 == 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// FuzzParseAddr compares the byte address parsers with netip.ParseAddr and
// checks that every beginning of a valid address is accepted as one.
func FuzzParseAddr(f *testing.F) {
	for _, s := range addrTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAddr(t, s)
	})
}
