package main

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		in   []float64
		want Summary
	}{
		{"odd count", []float64{5, 1, 3}, Summary{Median: 3, Min: 1, Max: 5, Rounds: 3}},
		{"even count averages the middle", []float64{4, 1, 3, 2}, Summary{Median: 2.5, Min: 1, Max: 4, Rounds: 4}},
		{"failed rounds are ignored", []float64{nan, 7, nan, 9, 8}, Summary{Median: 8, Min: 7, Max: 9, Rounds: 3}},
		{"single", []float64{2}, Summary{Median: 2, Min: 2, Max: 2, Rounds: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := summarize(tc.in); got != tc.want {
				t.Fatalf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
	if s := summarize([]float64{nan}); s.Rounds != 0 || !math.IsNaN(s.Median) {
		t.Fatalf("all-NaN: got %+v, want no rounds and NaN median", s)
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for _, tc := range []struct{ p, want float64 }{{50, 500}, {99, 990}, {99.9, 999}, {100, 1000}, {0, 1}} {
		if got := percentile(xs, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("percentile of nothing should be NaN")
	}
}
