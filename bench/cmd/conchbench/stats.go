package main

import (
	"math"
	"slices"
	"time"
)

// latency summarises a set of timings in milliseconds.
type latency struct {
	N        int     `json:"n"`
	MedianMs float64 `json:"medianMs"`
	P90Ms    float64 `json:"p90Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MinMs    float64 `json:"minMs"`
	MaxMs    float64 `json:"maxMs"`
}

// summarize sorts a copy of ds and reads nearest-rank percentiles off it.
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

// median is the nearest-rank median of ds.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentile(s, 0.5)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// mbps is bytes per second in MB (10^6 bytes).
func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// mb converts kB (as /proc reports them, 1024 bytes) to MiB.
func mb(kb int64) float64 { return float64(kb) / 1024 }
