package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestWriteBehind(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		key  types.NamespacedName
		at   time.Duration // after t0
		done bool          // call done instead of wait
		want time.Duration
	}
	tests := []struct {
		name        string
		window      time.Duration
		steps       []step
		wantPending int
	}{
		{
			name:   "off: every patch is due at once and nothing is remembered",
			window: 0,
			steps:  []step{{key: a, want: 0}, {key: a, at: time.Millisecond, want: 0}},
		},
		{
			name:   "negative window is off",
			window: -time.Second,
			steps:  []step{{key: a, want: 0}},
		},
		{
			name:   "the first drift starts the window, later passes wait for what is left",
			window: 500 * time.Millisecond,
			steps: []step{
				{key: a, at: 0, want: 500 * time.Millisecond},
				{key: a, at: 200 * time.Millisecond, want: 300 * time.Millisecond},
				{key: a, at: 500 * time.Millisecond, want: 0},
				{key: a, at: 900 * time.Millisecond, want: 0},
			},
			wantPending: 1,
		},
		{
			name:   "a window longer than the cap is capped",
			window: time.Hour,
			steps: []step{
				{key: a, at: 0, want: MaxWriteBehindWindow},
				{key: a, at: MaxWriteBehindWindow, want: 0},
			},
			wantPending: 1,
		},
		{
			name:   "done restarts the clock for the next drift",
			window: 300 * time.Millisecond,
			steps: []step{
				{key: a, at: 0, want: 300 * time.Millisecond},
				{key: a, at: 300 * time.Millisecond, want: 0},
				{key: a, at: 300 * time.Millisecond, done: true},
				{key: a, at: 400 * time.Millisecond, want: 300 * time.Millisecond},
			},
			wantPending: 1,
		},
		{
			name:   "keys have separate clocks",
			window: time.Second,
			steps: []step{
				{key: a, at: 0, want: time.Second},
				{key: b, at: 600 * time.Millisecond, want: time.Second},
				{key: a, at: time.Second, want: 0},
				{key: b, at: time.Second, want: 600 * time.Millisecond},
				{key: a, at: time.Second, done: true},
			},
			wantPending: 1,
		},
		{
			name:   "done on a key without a clock is harmless",
			window: time.Second,
			steps:  []step{{key: a, done: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWriteBehind(tt.window)
			for i, s := range tt.steps {
				if s.done {
					w.done(s.key)
					continue
				}
				if got := w.wait(s.key, t0.Add(s.at)); got != s.want {
					t.Errorf("step %d: wait(%s, t0+%s) = %s, want %s", i, s.key, s.at, got, s.want)
				}
			}
			if diff := cmp.Diff(tt.wantPending, w.pending()); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
		})
	}
}
