package activity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

func TestResolve(t *testing.T) {
	timeout := func(v string) map[string]string { return map[string]string{agentsv1beta1.IdleTimeoutAnnotation: v} }
	wake := func(v string) map[string]string { return map[string]string{agentsv1beta1.WakeOnRequestAnnotation: v} }
	for _, tc := range []struct {
		name   string
		layers []map[string]string
		want   Policy
	}{
		{name: "nothing set", want: Policy{WakeOnRequest: true}},
		{name: "template only", layers: []map[string]string{nil, nil, timeout("15m")}, want: Policy{Timeout: 15 * time.Minute, WakeOnRequest: true}},
		{name: "claim overrides template", layers: []map[string]string{nil, timeout("5m"), timeout("15m")}, want: Policy{Timeout: 5 * time.Minute, WakeOnRequest: true}},
		{name: "sandbox overrides claim", layers: []map[string]string{timeout("0"), timeout("5m"), timeout("15m")}, want: Policy{WakeOnRequest: true}},
		{name: "keys resolve independently", layers: []map[string]string{wake("false"), timeout("5m")}, want: Policy{Timeout: 5 * time.Minute}},
		{name: "invalid value counts as unset", layers: []map[string]string{timeout("soon"), timeout("5m"), wake("maybe")}, want: Policy{Timeout: 5 * time.Minute, WakeOnRequest: true}},
		{name: "negative duration counts as unset", layers: []map[string]string{timeout("-1m")}, want: Policy{WakeOnRequest: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Resolve(tc.layers...)); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnnotationsRoundTrip(t *testing.T) {
	for _, p := range []Policy{{Timeout: 90 * time.Second, WakeOnRequest: true}, {}} {
		if got := Resolve(p.Annotations()); got != p {
			t.Errorf("Resolve(%v.Annotations()) = %+v", p, got)
		}
	}
}
