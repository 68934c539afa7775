package bench

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted on purpose
	}
	tests := []struct {
		name    string
		samples []float64
		p       float64
		want    float64
	}{
		{name: "no samples", samples: nil, p: 50, want: 0},
		{name: "one sample p50", samples: []float64{7}, p: 50, want: 7},
		{name: "one sample p99", samples: []float64{7}, p: 99, want: 7},
		{name: "two samples p50 is the lower", samples: []float64{9, 3}, p: 50, want: 3},
		{name: "two samples p51 is the upper", samples: []float64{9, 3}, p: 51, want: 9},
		{name: "two samples p99", samples: []float64{9, 3}, p: 99, want: 9},
		{name: "hundred p50", samples: hundred, p: 50, want: 50},
		{name: "hundred p90", samples: hundred, p: 90, want: 90},
		{name: "hundred p99", samples: hundred, p: 99, want: 99},
		{name: "hundred p100", samples: hundred, p: 100, want: 100},
		{name: "p0 clamps to the minimum", samples: hundred, p: 0, want: 1},
		{name: "ten p99 is the maximum", samples: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, p: 99, want: 10},
		{name: "ties", samples: []float64{2, 2, 2, 5}, p: 75, want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Percentile(tc.samples, tc.p)); diff != "" {
				t.Errorf("Percentile(%v, %v) (-want +got):\n%s", tc.samples, tc.p, diff)
			}
		})
	}
}

func TestPercentileLeavesInputAlone(t *testing.T) {
	in := []float64{3, 1, 2}
	Percentile(in, 50)
	if diff := cmp.Diff([]float64{3, 1, 2}, in); diff != "" {
		t.Errorf("input changed (-want +got):\n%s", diff)
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    Summary
	}{
		{name: "none", samples: nil, want: Summary{}},
		{name: "one", samples: []float64{0.25}, want: Summary{N: 1, P50: 0.25, P90: 0.25, P99: 0.25, Max: 0.25}},
		{name: "two", samples: []float64{0.4, 0.1}, want: Summary{N: 2, P50: 0.1, P90: 0.4, P99: 0.4, Max: 0.4}},
		{
			name:    "ten",
			samples: []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1},
			want:    Summary{N: 10, P50: 5, P90: 9, P99: 10, Max: 10},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Summarize(tc.samples)); diff != "" {
				t.Errorf("Summarize(%v) (-want +got):\n%s", tc.samples, diff)
			}
		})
	}
}
