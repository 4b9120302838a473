package main

import (
	"math"
	"math/bits"
	"slices"
)

// rttHist is a log-linear histogram of round trips in microseconds: exact
// below 64 µs, then 32 buckets per doubling (about 3% wide), so client
// processes can each count their own share of 100,000 connections and the
// harness merges them into one p50/p99 without shipping every sample.
type rttHist map[int]uint64

const histSub = 32 // buckets per doubling above 2*histSub µs

// histBucket is the bucket index of v µs (negative values count as 0).
func histBucket(v int64) int {
	if v < 2*histSub {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - 6 // v>>shift is in [32, 64)
	return 2*histSub + (shift-1)*histSub + int(v>>shift) - histSub
}

// histLow and histHigh bound bucket i: [low, high) µs.
func histLow(i int) float64 {
	if i < 2*histSub {
		return float64(i)
	}
	shift := (i-2*histSub)/histSub + 1
	return float64((int64((i-2*histSub)%histSub) + histSub) << shift)
}

func histHigh(i int) float64 {
	if i < 2*histSub {
		return float64(i + 1)
	}
	shift := (i-2*histSub)/histSub + 1
	return histLow(i) + float64(int64(1)<<shift)
}

func (h rttHist) add(us int64) { h[histBucket(us)]++ }

func (h rttHist) merge(o rttHist) {
	for k, v := range o {
		h[k] += v
	}
}

func (h rttHist) count() uint64 {
	var n uint64
	for _, v := range h {
		n += v
	}
	return n
}

// quantile is the q-quantile (0..1) in µs, the midpoint of the bucket it
// falls in; NaN when empty.
func (h rttHist) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return math.NaN()
	}
	keys := make([]int, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for _, k := range keys {
		seen += h[k]
		if seen >= rank {
			return (histLow(k) + histHigh(k)) / 2
		}
	}
	k := keys[len(keys)-1]
	return (histLow(k) + histHigh(k)) / 2
}
