package sandboxwarmpool

import (
	"testing"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestCountsOnly(t *testing.T) {
	base := extensionsv1beta1.SandboxWarmPoolStatus{Replicas: 3, ReadyReplicas: 2, Selector: "s", ObservedGeneration: 1}
	tests := []struct {
		name string
		edit func(*extensionsv1beta1.SandboxWarmPoolStatus)
		want bool
	}{
		{name: "no change", edit: func(*extensionsv1beta1.SandboxWarmPoolStatus) {}, want: false},
		{name: "ready count", edit: func(s *extensionsv1beta1.SandboxWarmPoolStatus) { s.ReadyReplicas = 3 }, want: true},
		{name: "both counts", edit: func(s *extensionsv1beta1.SandboxWarmPoolStatus) { s.Replicas, s.ReadyReplicas = 2, 1 }, want: true},
		{name: "observed generation", edit: func(s *extensionsv1beta1.SandboxWarmPoolStatus) { s.ObservedGeneration = 2 }, want: false},
		{name: "counts and observed generation", edit: func(s *extensionsv1beta1.SandboxWarmPoolStatus) { s.Replicas, s.ObservedGeneration = 4, 2 }, want: false},
		{name: "selector", edit: func(s *extensionsv1beta1.SandboxWarmPoolStatus) { s.Selector = "t" }, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := base
			tt.edit(&after)
			if got := countsOnly(base, after); got != tt.want {
				t.Errorf("countsOnly = %v, want %v", got, tt.want)
			}
		})
	}
}
