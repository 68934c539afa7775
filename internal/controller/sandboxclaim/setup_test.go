package sandboxclaim

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

func TestBoundSandboxChanged(t *testing.T) {
	ready := metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue,
		Reason: agentsv1beta1.SandboxReasonDependenciesReady, Message: "Pod is Ready", ObservedGeneration: 1}
	base := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Generation: 1},
		Status: agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{ready}, PodIPs: []string{"198.18.0.5"}}}
	tests := []struct {
		name string
		edit func(*agentsv1beta1.Sandbox)
		want bool
	}{
		{name: "nothing the claim mirrors", edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.NodeName = "n" }, want: false},
		{name: "observed generation only", edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.Conditions[0].ObservedGeneration = 2 }, want: false},
		{name: "Ready flips", edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.Conditions[0].Status = metav1.ConditionFalse }, want: true},
		{name: "Ready message", edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.Conditions[0].Message = "other" }, want: true},
		{name: "Ready goes", edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.Conditions = nil }, want: true},
		{name: "Finished appears", edit: func(sb *agentsv1beta1.Sandbox) {
			sb.Status.Conditions = append(sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.SandboxConditionFinished, Status: metav1.ConditionTrue})
		}, want: true},
		{name: "pod IPs", edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.PodIPs = nil }, want: true},
		{name: "owner", edit: func(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences = []metav1.OwnerReference{{Name: "c"}} }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base.DeepCopy()
			tt.edit(n)
			if got := boundSandboxChanged(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != tt.want {
				t.Errorf("boundSandboxChanged = %v, want %v", got, tt.want)
			}
		})
	}
}
