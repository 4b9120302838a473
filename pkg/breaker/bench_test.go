package breaker

import (
	"testing"
)

func benchBreaker(b *testing.B, cfg Config) *Breaker {
	br, err := New(testKey, cfg.withDefaults(), NewMemoryStore(nil), Options{})
	if err != nil {
		b.Fatal(err)
	}
	return br
}

// The hot path of a client connection: Allow, Begin, Done(Success).
func BenchmarkClientDialSuccess(b *testing.B) {
	br := benchBreaker(b, Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if br.Allow() {
				br.Done(br.Begin(KindClient), Success)
			}
		}
	})
}

// With min_ratio on, every success is recorded in the ratio buckets.
func BenchmarkClientDialSuccessMinRatio(b *testing.B) {
	br := benchBreaker(b, Config{MinRatio: 0.5, MinVolume: 10})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if br.Allow() {
				br.Done(br.Begin(KindClient), Success)
			}
		}
	})
}

// Stale results after a trip: the burst of in-flight dials returning.
func BenchmarkStaleResult(b *testing.B) {
	br := benchBreaker(b, Config{})
	a := br.Begin(KindClient)
	for range br.Config().Failures {
		br.Done(br.Begin(KindClient), Failure)
	}
	b.ReportAllocs()
	for b.Loop() {
		br.Done(a, Success)
	}
}
