package clienthello

import (
	"crypto/tls"
	"fmt"
	"reflect"
	"testing"
)

// A Reader reading one hello after another, of every shape, says what
// Inspect says of each, though it hands out the slices and strings of the
// hellos before: nothing of one hello shows in the next.
func TestReaderAgreesWithInspectHelloAfterHello(t *testing.T) {
	caps := goCaptures(t)
	var wires [][]byte
	for _, c := range caps {
		wires = append(wires, c.wire, records(message(t, c.wire), 7)) // one record, and cut into many
	}
	wires = append(wires, []byte("GET / HTTP/1.1\r\n"), caps[0].wire[:20])
	r := NewReader()
	for round := range 3 {
		for i, w := range wires {
			v, h := r.Inspect(w)
			wantV, wantH := Inspect(w)
			if v != wantV || !reflect.DeepEqual(h, wantH) {
				t.Fatalf("round %d, hello %d: the Reader says %v %+v, Inspect %v %+v", round, i, v, h, wantV, wantH)
			}
		}
	}
}

// Once it has seen a hello's names, a Reader inspects the next like it
// with no allocation: Go's default client offers a server name and
// versions, a browser ALPN too, and a hello cut into records is put back
// together in the Reader's buffer.
func TestReaderInspectsAKnownHelloWithoutAllocating(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire []byte
	}{
		{"go default", goHello(t, &tls.Config{ServerName: "api.example.com"})},
		{"ALPN", goHello(t, &tls.Config{ServerName: "h2.example.com", NextProtos: []string{"h2", "http/1.1"}})},
		{"records of 100 bytes", records(message(t, goHello(t, &tls.Config{ServerName: "api.example.com"})), 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader()
			if v, _ := r.Inspect(tc.wire); v != Complete {
				t.Fatalf("verdict %v", v)
			}
			if n := testing.AllocsPerRun(100, func() { r.Inspect(tc.wire) }); n != 0 {
				t.Fatalf("%v allocations per hello once its names were seen, want 0", n)
			}
		})
	}
}

// A Reader keeps at most maxInterned names: clients naming ever new
// servers cost it no more memory than that, and every name still comes
// back right.
func TestReaderForgetsNamesPastItsBound(t *testing.T) {
	r := NewReader()
	for i := range 3 * maxInterned {
		name := fmt.Sprintf("host-%d.example.com", i)
		v, h := r.Inspect(goHello(t, &tls.Config{ServerName: name}))
		if v != Complete || h.ServerName != name {
			t.Fatalf("hello %d: %v %q, want %q", i, v, h.ServerName, name)
		}
		if n := len(r.names); n > maxInterned {
			t.Fatalf("%d names kept after %d hellos, want at most %d", n, i+1, maxInterned)
		}
	}
}
