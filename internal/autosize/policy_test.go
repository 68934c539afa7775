package autosize

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        Policy
		on          bool
		err         string
	}{
		{name: "absent is off", annotations: map[string]string{"paddock.dev/autosize-min": "x"}},
		{name: "false is off", annotations: map[string]string{"paddock.dev/autosize": "false"}},
		{name: "true takes the defaults", annotations: map[string]string{"paddock.dev/autosize": "true"},
			want: Policy{Min: 1, Max: 10, Headroom: 1}, on: true},
		{name: "every annotation set", on: true, want: Policy{Min: 2, Max: 8, Headroom: 0},
			annotations: map[string]string{"paddock.dev/autosize": "true", "paddock.dev/autosize-min": "2",
				"paddock.dev/autosize-max": "8", "paddock.dev/autosize-headroom": "0"}},
		{name: "a value other than true or false", on: true,
			annotations: map[string]string{"paddock.dev/autosize": "yes"},
			err:         `metadata.annotations[paddock.dev/autosize]: "yes" must be "true" or "false"`},
		{name: "a minimum that is not a number", on: true, want: Policy{Min: 1, Max: 10, Headroom: 1},
			annotations: map[string]string{"paddock.dev/autosize": "true", "paddock.dev/autosize-min": "two"},
			err:         `metadata.annotations[paddock.dev/autosize-min]: "two" is not an integer from 0 to 10000; set for example "1"`},
		{name: "a maximum of 0", on: true, want: Policy{Min: 1, Max: 10, Headroom: 1},
			annotations: map[string]string{"paddock.dev/autosize": "true", "paddock.dev/autosize-max": "0"},
			err:         `metadata.annotations[paddock.dev/autosize-max]: "0" is not an integer from 1 to 10000`},
		{name: "a negative headroom", on: true, want: Policy{Min: 1, Max: 10, Headroom: 1},
			annotations: map[string]string{"paddock.dev/autosize": "true", "paddock.dev/autosize-headroom": "-1"},
			err:         `metadata.annotations[paddock.dev/autosize-headroom]: "-1" is not an integer from 0 to 10000`},
		{name: "a minimum above the maximum", on: true, want: Policy{Min: 5, Max: 3, Headroom: 1},
			annotations: map[string]string{"paddock.dev/autosize": "true", "paddock.dev/autosize-min": "5", "paddock.dev/autosize-max": "3"},
			err:         `metadata.annotations[paddock.dev/autosize-min]: 5 is above the maximum 3`},
		{name: "a minimum above the default maximum", on: true, want: Policy{Min: 11, Max: 10, Headroom: 1},
			annotations: map[string]string{"paddock.dev/autosize": "true", "paddock.dev/autosize-min": "11"},
			err:         `metadata.annotations[paddock.dev/autosize-min]: 11 is above the maximum 10 (paddock.dev/autosize-max, 10 when absent)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, on, err := FromAnnotations(tt.annotations)
			if on != tt.on {
				t.Errorf("on = %v, want %v", on, tt.on)
			}
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error = %v, want it to contain %q", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, p); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
		})
	}
}
