package main

import (
	"math"
	"slices"
)

// Better says which direction of a metric is an improvement; it decides
// which peer is "best" when ratios are computed.
type Better int

const (
	HigherBetter Better = iota
	LowerBetter
)

// MetricDef names one figure a scenario reports.
type MetricDef struct {
	Name   string
	Unit   string
	Better Better
	// Chart marks the metrics drawn in the SVG panel of the scenario.
	Chart bool
	// NoRatio: counts and differences whose reference can be zero
	// (failures, added µs) are not divided.
	NoRatio bool
}

// Summary is the median with its range over the rounds of one system.
type Summary struct {
	Median, Min, Max float64
	Rounds           int
}

// summarize returns the median, min and max of xs, ignoring NaNs (a round
// that could not produce the figure). Rounds counts the values used.
func summarize(xs []float64) Summary {
	vals := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			vals = append(vals, x)
		}
	}
	if len(vals) == 0 {
		return Summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(vals)
	return Summary{Median: median(vals), Min: vals[0], Max: vals[len(vals)-1], Rounds: len(vals)}
}

// median of an already sorted, non-empty slice.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// percentile of an already sorted slice, nearest-rank; NaN when empty.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p*float64(len(sorted))/100-1e-9)) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}
