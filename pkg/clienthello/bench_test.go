package clienthello

import (
	"crypto/tls"
	"testing"
)

// BenchmarkInspect runs Inspect on Go's default post-quantum hello with
// ALPN (about 1.5 KB): whole, cut into two records, and the need-more
// path on its first half, which a relay meets on every early read.
func BenchmarkInspect(b *testing.B) {
	wire := goHello(b, &tls.Config{ServerName: "api.example.com", NextProtos: []string{"h2", "http/1.1"}})
	msg := message(b, wire)
	for _, c := range []struct {
		name string
		in   []byte
		want Verdict
	}{
		{"whole", wire, Complete},
		{"two records", records(msg, len(msg)/2+1), Complete},
		{"prefix", wire[:len(wire)/2], NeedMore},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				if v, _ := Inspect(c.in); v != c.want {
					b.Fatal(v)
				}
			}
		})
	}
}
