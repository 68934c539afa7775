package autosize

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// stream returns n claims every `every`, the last one `every` before now, oldest first.
func stream(n int, every time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = now.Add(-time.Duration(n-i) * every)
	}
	return out
}

// burst returns n claims within the last `within`, oldest first.
func burst(n int, within time.Duration) []time.Time { return stream(n, within/time.Duration(n)) }

func times(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func at(ago time.Duration, replicas int32) Recommendation {
	return Recommendation{At: now.Add(-ago), Replicas: replicas}
}

// outcome is the part of a Decision the table checks.
type outcome struct {
	Replicas, Recommended int32
	NoData                bool
	RecheckAt             time.Time
}

func TestDecide(t *testing.T) {
	policy := Policy{Min: 2, Max: 20, Headroom: 1}
	base := Input{Policy: policy, Current: 2, RateWindow: time.Minute, Window: 5 * time.Minute, Now: now,
		ReadyTimes: times(3*time.Second, 10)}
	in := func(f func(*Input)) Input { i := base; f(&i); return i }
	tests := []struct {
		name string
		in   Input
		want outcome
	}{
		{
			name: "no data yet keeps the user's replicas",
			in:   in(func(i *Input) { i.ReadyTimes, i.Current, i.Claims = nil, 5, burst(10, time.Second) }),
			want: outcome{Replicas: 5, Recommended: 5, NoData: true, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "no data yet raises replicas below the minimum to it",
			in:   in(func(i *Input) { i.ReadyTimes, i.Current = nil, 0 }),
			want: outcome{Replicas: 2, Recommended: 2, NoData: true},
		},
		{
			name: "no claims at the minimum stays there",
			in:   base,
			want: outcome{Replicas: 2, Recommended: 2},
		},
		{
			// 299 claims over 59.8 s is 5/s; 5/s x 3 s = 15 members, plus 1.
			name: "a steady stream is sized at rate times start-up time plus headroom",
			in:   in(func(i *Input) { i.Claims = stream(300, 200*time.Millisecond) }),
			want: outcome{Replicas: 16, Recommended: 16, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "claims older than the rate window do not count",
			in:   in(func(i *Input) { i.Claims = stream(300, time.Second) }),
			// 59 claims over 59 s: 1/s x 3 s = 3, plus 1.
			want: outcome{Replicas: 4, Recommended: 4, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "a burst within one start-up time needs a member for every claim",
			in:   in(func(i *Input) { i.Claims = burst(10, time.Second) }),
			want: outcome{Replicas: 11, Recommended: 11, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "a burst is capped at the maximum",
			in:   in(func(i *Input) { i.Claims = burst(50, time.Second) }),
			want: outcome{Replicas: 20, Recommended: 20, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "the start-up time is the 90th percentile of what was seen",
			in: in(func(i *Input) {
				i.Claims = stream(300, 200*time.Millisecond)
				i.ReadyTimes = append(times(time.Second, 17), 2*time.Second, 2*time.Second, 30*time.Second)
			}),
			// 5/s x 2 s = 10, plus 1: the one 30 s start is the slowest 5%.
			want: outcome{Replicas: 11, Recommended: 11, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "quiet after a burst holds the size within the stabilization window",
			in: in(func(i *Input) {
				i.Current, i.History = 11, []Recommendation{at(2*time.Minute, 11)}
			}),
			want: outcome{Replicas: 11, Recommended: 2, RecheckAt: now.Add(3 * time.Minute)},
		},
		{
			name: "quiet for the whole window shrinks to what demand asks",
			in: in(func(i *Input) {
				i.Current, i.History = 11, []Recommendation{at(5*time.Minute, 11)}
			}),
			want: outcome{Replicas: 2, Recommended: 2},
		},
		{
			name: "a shrink goes only down to the highest recommendation left in the window",
			in: in(func(i *Input) {
				i.Current, i.History = 11, []Recommendation{at(6*time.Minute, 11), at(4*time.Minute, 6)}
			}),
			want: outcome{Replicas: 6, Recommended: 2, RecheckAt: now.Add(time.Minute)},
		},
		{
			name: "growth is at once, whatever the window holds",
			in: in(func(i *Input) {
				i.Current, i.History, i.Claims = 6, []Recommendation{at(time.Minute, 4)}, burst(8, time.Second)
			}),
			want: outcome{Replicas: 9, Recommended: 9, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "after a restart lower demand waits a whole window",
			in:   in(func(i *Input) { i.Current = 8 }),
			want: outcome{Replicas: 8, Recommended: 2, RecheckAt: now.Add(5 * time.Minute)},
		},
		{
			name: "replicas above the maximum come down at once",
			in: in(func(i *Input) {
				i.Current, i.History = 30, []Recommendation{at(time.Minute, 30)}
			}),
			want: outcome{Replicas: 20, Recommended: 2, RecheckAt: now.Add(4 * time.Minute)},
		},
		{
			name: "headroom 0 and minimum 0 let a quiet pool empty",
			in: in(func(i *Input) {
				i.Policy, i.Current, i.History = Policy{Min: 0, Max: 5, Headroom: 0}, 3, []Recommendation{at(10*time.Minute, 3)}
			}),
			want: outcome{Replicas: 0, Recommended: 0},
		},
		{
			// Headroom is on top of demand: with none, minimum 0 means no member.
			name: "minimum 0 lets a quiet pool empty with headroom",
			in: in(func(i *Input) {
				i.Policy, i.Current, i.History = Policy{Min: 0, Max: 5, Headroom: 2}, 3, []Recommendation{at(10*time.Minute, 3)}
			}),
			want: outcome{Replicas: 0, Recommended: 0},
		},
		{
			name: "one claim at minimum 0 asks for a member and the headroom",
			in: in(func(i *Input) {
				i.Policy, i.Current, i.Claims = Policy{Min: 0, Max: 5, Headroom: 2}, 0, []time.Time{now.Add(-time.Second)}
			}),
			want: outcome{Replicas: 3, Recommended: 3, RecheckAt: now.Add(5 * time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.in)
			got := outcome{Replicas: d.Replicas, Recommended: d.Recommended, NoData: d.NoData, RecheckAt: d.RecheckAt}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideOverTime replays claim streams through successive decisions, as the controller
// makes them, and checks the size at each step: no shrink before the window has passed, and
// no size that goes back up without new demand.
func TestDecideOverTime(t *testing.T) {
	policy := Policy{Min: 2, Max: 8, Headroom: 1}
	const window, rateWindow = 5 * time.Minute, time.Minute
	ready := times(2*time.Second, 5)
	start := now
	var (
		claims  []time.Time
		history []Recommendation
		current int32 = 2
		sizes   []int32
	)
	decide := func(at time.Time) {
		d := Decide(Input{Policy: policy, Current: current, Claims: claims, RateWindow: rateWindow,
			ReadyTimes: ready, History: history, Window: window, Now: at})
		history, current = d.History, d.Replicas
		sizes = append(sizes, current)
	}
	// A 2/s stream for a minute, a decision after each claim: 2/s x 2 s = 4, plus 1.
	at := start
	for range 120 {
		at = at.Add(500 * time.Millisecond)
		claims = append(claims, at)
		decide(at)
	}
	if current != 5 {
		t.Fatalf("after a minute of 2 claims/s the pool has %d members, want 5", current)
	}
	for _, s := range sizes {
		if s > 5 {
			t.Fatalf("sizes under a steady 2/s went above 5: %v", sizes)
		}
	}
	// Quiet: a decision every 10 s. The pool holds 5 for at least the window, then steps down
	// as the higher recommendations leave it, and is at the minimum once the last claim has
	// left the rate window and the window has passed since.
	stopped := at
	sizes = nil
	for range 60 {
		at = at.Add(10 * time.Second)
		decide(at)
		switch {
		case at.Sub(stopped) < window && current != 5:
			t.Fatalf("%s after the stream stopped the pool has %d members, want 5 until the window passes", at.Sub(stopped), current)
		case at.Sub(stopped) > window+rateWindow && current != 2:
			t.Fatalf("%s after the stream stopped the pool has %d members, want the minimum 2", at.Sub(stopped), current)
		}
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] > sizes[i-1] {
			t.Fatalf("the quiet pool grew again: %v", sizes)
		}
	}
}

func TestDecideWhy(t *testing.T) {
	p := Policy{Min: 2, Max: 8, Headroom: 1}
	tests := []struct {
		name    string
		current int32
		d       Decision
		want    string
	}{
		{"up", 2, Decision{Replicas: 5, Wanted: 5, Claims: 12, Rate: 2, ReadyTime: 2 * time.Second},
			"spec.replicas 2 -> 5: 12 claims (2.00/s) x 2s to Ready + headroom 1"},
		{"capped", 2, Decision{Replicas: 8, Wanted: 12, Claims: 30, Rate: 5.5, ReadyTime: 2 * time.Second},
			"capped at paddock.dev/autosize-max 8"},
		{"down", 8, Decision{Replicas: 2}, "spec.replicas 8 -> 2: demand stayed at or below 2 for 5m0s"},
		{"above max", 9, Decision{Replicas: 8}, "above paddock.dev/autosize-max 8"},
		{"below min", 1, Decision{Replicas: 2}, "below paddock.dev/autosize-min 2"},
	}
	for _, tt := range tests {
		if got := tt.d.Why(p, tt.current, 5*time.Minute); !strings.Contains(got, tt.want) {
			t.Errorf("%s: Why = %q, want it to contain %q", tt.name, got, tt.want)
		}
	}
}
