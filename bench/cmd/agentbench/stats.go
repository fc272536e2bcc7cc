package main

import (
	"math"
	"slices"
	"time"
)

// latency summarises a set of timings in milliseconds (nearest-rank
// percentiles over the sorted timings).
type latency struct {
	N        int     `json:"n"`
	MedianMs float64 `json:"medianMs"`
	P90Ms    float64 `json:"p90Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MinMs    float64 `json:"minMs"`
	MaxMs    float64 `json:"maxMs"`
}

func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return latency{
		N:        len(s),
		MedianMs: ms(percentile(s, 0.50)),
		P90Ms:    ms(percentile(s, 0.90)),
		P99Ms:    ms(percentile(s, 0.99)),
		MinMs:    ms(s[0]),
		MaxMs:    ms(s[len(s)-1]),
	}
}

// percentile is the nearest-rank percentile p (0..1] of sorted s.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentile(s, 0.5)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
