package main

import (
	"math"
	"slices"
	"time"
)

// latency summarises a set of timings in milliseconds.
type latency struct {
	N      int     `json:"n"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	MinMs  float64 `json:"minMs"`
	MaxMs  float64 `json:"maxMs"`
}

// summarize sorts ds and reads nearest-rank percentiles off it.
func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return latency{
		N:      len(ds),
		MeanMs: ms(sum / time.Duration(len(ds))),
		P50Ms:  ms(percentile(ds, 0.50)),
		P90Ms:  ms(percentile(ds, 0.90)),
		P99Ms:  ms(percentile(ds, 0.99)),
		MinMs:  ms(ds[0]),
		MaxMs:  ms(ds[len(ds)-1]),
	}
}

// percentile is the nearest-rank percentile p (0..1] of sorted s.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
