package bench

import (
	"math"
	"sort"
)

// Summary is the distribution of a scenario's latencies, in seconds.
type Summary struct {
	// N is the number of samples the percentiles are computed from.
	N   int     `json:"n"`
	P50 float64 `json:"p50Seconds"`
	P90 float64 `json:"p90Seconds"`
	P99 float64 `json:"p99Seconds"`
	Max float64 `json:"maxSeconds"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of samples: the smallest
// sample that at least p percent of the samples do not exceed. Nearest rank always returns an
// observed value, which keeps p99 of a small run honest (it is the maximum below 100 samples).
// It returns 0 for no samples. samples need not be sorted and are not modified.
func Percentile(samples []float64, p float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	sorted := append([]float64(nil), samples...)
	sort.Float64s(sorted)
	return nearestRank(sorted, p)
}

func nearestRank(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Summarize computes the percentiles of samples (seconds) in one sort.
func Summarize(samples []float64) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	sorted := append([]float64(nil), samples...)
	sort.Float64s(sorted)
	return Summary{
		N:   len(sorted),
		P50: nearestRank(sorted, 50),
		P90: nearestRank(sorted, 90),
		P99: nearestRank(sorted, 99),
		Max: sorted[len(sorted)-1],
	}
}
