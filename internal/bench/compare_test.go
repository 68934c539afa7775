package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCompare(t *testing.T) {
	got, err := ParseCompare(" reg/c:a , reg/c:b")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"reg/c:a", "reg/c:b"}, got); diff != "" {
		t.Errorf("ParseCompare (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "reg/c:a", "reg/c:a,", "a,b,c"} {
		if _, err := ParseCompare(bad); err == nil || !strings.Contains(err.Error(), "give two controller images") {
			t.Errorf("ParseCompare(%q) = %v, want an error asking for two images", bad, err)
		}
	}
}

func TestCompareOptionsValidate(t *testing.T) {
	o := NewOptions()
	o.Compare, o.From = "a,b", "/tmp/earlier"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "cannot be combined with --from") {
		t.Errorf("Validate(--compare with --from) = %v, want an error", err)
	}
	o = NewOptions()
	o.Compare, o.Controller.Deployment = "a,b", ""
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--controller-deployment") {
		t.Errorf("Validate(--compare without a Deployment) = %v, want an error", err)
	}
}

func TestCompareMarkdown(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	a := &Report{Conditions: Conditions{ControllerImage: "reg/c:a", Time: at}, Scenarios: []Result{
		{Name: "warm 20/s", Kind: KindWarm, Latency: Summary{N: 1, P50: 0.4, P90: 0.8, P99: 1, Max: 1}, AllReadySeconds: 15, WritesPerClaim: 12},
		{Name: "hold 10", Kind: KindHold, Latency: Summary{N: 1, P50: 1, P90: 1, P99: 1, Max: 1}, AllReadySeconds: 2, WritesPerClaim: 8,
			Hold: &Hold{Settled: ControllerMetrics{RSSBytes: 200 << 20}, AfterResync: ControllerMetrics{RSSBytes: 100 << 20},
				CPUCoresCreating: 1, ProbeReadySeconds: 10, ResyncSeconds: 20, ResyncComplete: true}},
		{Name: "cold 5", Kind: KindCold},
	}}
	b := &Report{Conditions: Conditions{ControllerImage: "reg/c:b", Time: at.Add(time.Hour)}, Scenarios: []Result{
		{Name: "warm 20/s", Kind: KindWarm, Latency: Summary{N: 1, P50: 0.1, P90: 0.2, P99: 0.5, Max: 2}, AllReadySeconds: 15, WritesPerClaim: 6},
		{Name: "hold 10", Kind: KindHold, Latency: Summary{N: 1, P50: 1, P90: 1, P99: 1, Max: 1}, AllReadySeconds: 2, WritesPerClaim: 8,
			Hold: &Hold{Settled: ControllerMetrics{RSSBytes: 100 << 20}, AfterResync: ControllerMetrics{RSSBytes: 100 << 20},
				CPUCoresCreating: 0.5, ProbeReadySeconds: 5, ResyncComplete: false}},
	}}
	want := `A: reg/c:a (measured 2026-11-30T01:00:00Z)

B: reg/c:b (measured 2026-11-30T02:00:00Z)

| scenario | metric | A | B | B/A |
|---|---|---|---|---|
| warm 20/s | p50 | 400 ms | 100 ms | 0.25 |
| warm 20/s | p90 | 800 ms | 200 ms | 0.25 |
| warm 20/s | p99 | 1000 ms | 500 ms | 0.50 |
| warm 20/s | max | 1000 ms | 2000 ms | 2.00 |
| warm 20/s | all Ready | 15.0 s | 15.0 s | 1.00 |
| warm 20/s | API writes per object | 12.0 | 6.0 | 0.50 |
| hold 10 | p50 | 1000 ms | 1000 ms | 1.00 |
| hold 10 | p90 | 1000 ms | 1000 ms | 1.00 |
| hold 10 | p99 | 1000 ms | 1000 ms | 1.00 |
| hold 10 | max | 1000 ms | 1000 ms | 1.00 |
| hold 10 | all Ready | 2000 ms | 2000 ms | 1.00 |
| hold 10 | API writes per object | 8.0 | 8.0 | 1.00 |
| hold 10 | RSS settled | 200 MiB | 100 MiB | 0.50 |
| hold 10 | RSS after resync | 100 MiB | 100 MiB | 1.00 |
| hold 10 | CPU while creating | 1.00 cores | 0.50 cores | 0.50 |
| hold 10 | probe Ready after restart | 10.0 s | 5000 ms | 0.50 |
| hold 10 | full resync | 20.0 s | not reached | – |
| cold 5 | – | ran | did not run | – |
`
	if diff := cmp.Diff(want, CompareMarkdown(a, b)); diff != "" {
		t.Errorf("CompareMarkdown (-want +got):\n%s", diff)
	}
}
