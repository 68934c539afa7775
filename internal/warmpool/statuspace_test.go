package warmpool

import (
	"testing"
	"time"
)

func TestStatusPacer(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		interval   time.Duration
		wrote      []time.Duration // offsets from t0 of earlier writes of the pool
		countsOnly bool
		at         time.Duration
		want       time.Duration
	}{
		{name: "first write goes at once", interval: time.Second, countsOnly: true, want: 0},
		{name: "count change right after a write waits out the interval", interval: time.Second, wrote: []time.Duration{0}, countsOnly: true, at: 300 * time.Millisecond, want: 700 * time.Millisecond},
		{name: "count change after the interval goes", interval: time.Second, wrote: []time.Duration{0}, countsOnly: true, at: time.Second, want: 0},
		{name: "the latest write counts", interval: time.Second, wrote: []time.Duration{0, 900 * time.Millisecond}, countsOnly: true, at: time.Second, want: 900 * time.Millisecond},
		{name: "other changes never wait", interval: time.Second, wrote: []time.Duration{0}, countsOnly: false, at: time.Millisecond, want: 0},
		{name: "interval 0 disables pacing", interval: 0, wrote: []time.Duration{0}, countsOnly: true, at: time.Millisecond, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &StatusPacer{Interval: tt.interval}
			for _, w := range tt.wrote {
				p.Wrote("ns/pool", t0.Add(w))
			}
			p.Wrote("ns/other", t0.Add(tt.at)) // another pool's writes do not count
			if got := p.Wait("ns/pool", tt.countsOnly, t0.Add(tt.at)); got != tt.want {
				t.Errorf("Wait = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatusPacerForget(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	p := &StatusPacer{Interval: time.Second}
	p.Wrote("ns/pool", t0)
	p.Forget("ns/pool")
	if got := p.Wait("ns/pool", true, t0); got != 0 {
		t.Errorf("Wait after Forget = %v, want 0: a recreated pool starts afresh", got)
	}
}
