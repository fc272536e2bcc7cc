package benchkit

import (
	"math"
	"slices"
	"time"
)

// Latency summarises a set of timings in milliseconds (nearest-rank
// percentiles over the sorted timings).
type Latency struct {
	N        int     `json:"n"`
	MedianMs float64 `json:"medianMs"`
	P90Ms    float64 `json:"p90Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MinMs    float64 `json:"minMs"`
	MaxMs    float64 `json:"maxMs"`
}

// Summarize sorts a copy of ds and reads nearest-rank percentiles off it;
// ds itself is left as it is.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return Latency{
		N:        len(s),
		MedianMs: Ms(Percentile(s, 0.50)),
		P90Ms:    Ms(Percentile(s, 0.90)),
		P99Ms:    Ms(Percentile(s, 0.99)),
		MinMs:    Ms(s[0]),
		MaxMs:    Ms(s[len(s)-1]),
	}
}

// Percentile is the nearest-rank percentile p (0..1] of sorted, which
// must not be empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Median is the nearest-rank median of ds, or 0 when ds is empty.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return Percentile(s, 0.5)
}

// Mean is the arithmetic mean of ds (truncated to the nanosecond), or 0
// when ds is empty.
func Mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Ratio returns a/b, or 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// MBps is bytes per second in MB (10^6 bytes), or 0 when d is not
// positive.
func MBps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// MiB converts kB (as /proc reports them, 1024 bytes) to MiB.
func MiB(kb int64) float64 { return float64(kb) / 1024 }
