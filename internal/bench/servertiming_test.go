package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseServerTiming(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values []string
		want   serverSteps
	}{
		{name: "no header", want: serverSteps{}},
		{name: "the front door's steps", values: []string{`claim;dur=10.5, bound;dur=20.0, daemon;dur=15.0;desc="2 refused", probe;dur=3.0`},
			want: serverSteps{"claim": 10500 * time.Microsecond, "bound": 20 * time.Millisecond, "daemon": 15 * time.Millisecond,
				"probe": 3 * time.Millisecond, refusedStep: 2}},
		{name: "two header lines, a step without duration, a malformed one", values: []string{"claim;dur=1", "cache, bound;dur=x, probe;dur=2.5"},
			want: serverSteps{"claim": time.Millisecond, "probe": 2500 * time.Microsecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseServerTiming(tt.values)); diff != "" {
				t.Errorf("parseServerTiming (-want +got):\n%s", diff)
			}
		})
	}
}
