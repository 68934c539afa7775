package bench

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestBlueprintPlacement(t *testing.T) {
	if got := blueprint("img", false).PodTemplate.Spec; got.NodeSelector != nil || got.Tolerations != nil {
		t.Errorf("default placement = selector %v, tolerations %v; want none", got.NodeSelector, got.Tolerations)
	}
	got := blueprint("img", true).PodTemplate.Spec
	if diff := cmp.Diff(map[string]string{"type": "kwok"}, got.NodeSelector); diff != "" {
		t.Errorf("KWOK node selector (-want +got):\n%s", diff)
	}
	want := []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(want, got.Tolerations); diff != "" {
		t.Errorf("KWOK tolerations (-want +got):\n%s", diff)
	}
}
