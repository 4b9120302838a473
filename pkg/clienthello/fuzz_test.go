package clienthello

import (
	"bytes"
	"crypto/tls"
	"reflect"
	"testing"
)

// FuzzInspect checks Inspect on any bytes b followed by any more: no panic
// and no read past b (b's capacity is its length); b left as it was; a
// verdict other than NeedMore stays the same, hello and all, whatever
// follows, and is what some shorter prefixes needed more to reach; NeedMore
// never comes at MaxBytes; a hello's name is normalized and its WireLen
// within b; a Reader that inspected every input before says the same.
func FuzzInspect(f *testing.F) {
	shared := NewReader()
	for _, c := range goCaptures(f) {
		f.Add(c.wire, []byte(nil))
		f.Add(records(message(f, c.wire), 7), []byte{20, 3, 3, 0, 1, 1})
	}
	small := message(f, goHello(f, &tls.Config{ServerName: "old.example.com", MaxVersion: tls.VersionTLS12}))
	f.Add(records(small, 1), []byte(nil))
	f.Add([]byte("GET / HTTP/1.1\r\n"), []byte("Host: x\r\n"))
	f.Add([]byte("\x15\x03\x03\x00\x02\x02\x28"), []byte(nil))
	f.Fuzz(func(t *testing.T, b, more []byte) {
		b = b[:len(b):len(b)]
		before := bytes.Clone(b)
		v, h := Inspect(b)
		if !bytes.Equal(b, before) {
			t.Fatal("Inspect changed its input")
		}
		if v2, h2 := shared.Inspect(b); v2 != v || !reflect.DeepEqual(h2, h) {
			t.Fatalf("a Reader says %v %+v, Inspect %v %+v", v2, h2, v, h)
		}
		switch v {
		case NeedMore:
			if len(b) >= MaxBytes {
				t.Fatalf("need_more after %d bytes", len(b))
			}
		case Complete:
			checkHello(t, b, h)
		case NotTLS, Malformed, TooLarge:
		default:
			t.Fatalf("verdict %d", int(v))
		}
		if v != NeedMore && !reflect.DeepEqual(h, Hello{}) && v != Complete {
			t.Fatalf("%v with %+v", v, h)
		}
		if v == NeedMore {
			return
		}
		longer := append(bytes.Clone(b), more...)
		if v2, h2 := Inspect(longer); v2 != v || !reflect.DeepEqual(h2, h) {
			t.Fatalf("%d bytes: %v %+v; and %d more: %v %+v", len(b), v, h, len(more), v2, h2)
		}
		for _, k := range []int{len(b) - 1, len(b) / 2, len(b) / 3, 9, 5, 1} {
			if k < 0 || k >= len(b) {
				continue
			}
			if v2, h2 := Inspect(b[:k:k]); v2 != NeedMore && (v2 != v || !reflect.DeepEqual(h2, h)) {
				t.Fatalf("%d bytes: %v %+v; their first %d: %v %+v", len(b), v, h, k, v2, h2)
			}
		}
	})
}

// checkHello checks what any Complete hello must be.
func checkHello(t *testing.T, b []byte, h Hello) {
	t.Helper()
	if h.WireLen < recordHeaderLen+handshakeHeaderLen+minHelloBody || h.WireLen > len(b) || h.WireLen > MaxBytes {
		t.Fatalf("WireLen %d of %d bytes", h.WireLen, len(b))
	}
	if v, _ := Inspect(b[: h.WireLen-1 : h.WireLen-1]); v != NeedMore {
		t.Fatalf("hello of %d bytes, all but its last: %v", h.WireLen, v)
	}
	name := h.ServerName
	if len(name) > maxNameLen || name != "" && (name[0] == '.' || name[len(name)-1] == '.') {
		t.Fatalf("server name %q", name)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			t.Fatalf("server name %q", name)
		}
	}
	for _, p := range h.ALPN {
		if p == "" {
			t.Fatalf("ALPN %q", h.ALPN)
		}
	}
}
