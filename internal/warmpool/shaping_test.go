package warmpool

import (
	"testing"
	"time"
)

func TestShaping(t *testing.T) {
	type step struct {
		after        time.Duration // since the previous step
		want, active int
		allow        int
		retry        bool
	}
	tests := []struct {
		name  string
		s     *Shaping
		steps []step
	}{
		{"no shaping", &Shaping{}, []step{{0, 5, 0, 5, false}, {0, 3, 2, 3, false}}},
		{"first observation and scale-ups are never delayed", &Shaping{ReplenishDelay: time.Minute}, []step{
			{0, 3, 0, 3, false}, {time.Second, 2, 3, 2, false},
		}},
		{"a drop arms the delay, which re-arms on every drop", &Shaping{ReplenishDelay: 10 * time.Second}, []step{
			{0, 0, 3, 0, false}, {0, 1, 2, 0, true}, {5 * time.Second, 2, 1, 0, true},
			{9 * time.Second, 2, 1, 0, true}, {time.Second, 2, 1, 2, false},
		}},
		{"rate limit with a full bucket at start", &Shaping{MaxRefillRate: 2}, []step{
			{0, 5, 0, 2, true}, {0, 3, 0, 0, true}, {500 * time.Millisecond, 3, 0, 1, true}, {10 * time.Second, 5, 0, 2, true},
		}},
		{"rate below one still lets one through", &Shaping{MaxRefillRate: 0.5}, []step{
			{0, 2, 0, 1, true}, {time.Second, 1, 0, 0, true}, {time.Second, 1, 0, 1, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			for i, st := range tt.steps {
				now = now.Add(st.after)
				n, retry := tt.s.Allow("ns/pool", st.want, st.active, now)
				if n != st.allow || (retry > 0) != st.retry {
					t.Errorf("step %d: Allow = %d, retry %s; want %d, retry %v", i, n, retry, st.allow, st.retry)
				}
			}
		})
	}
}
