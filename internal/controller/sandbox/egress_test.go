package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
)

func TestSetEgressPolicy(t *testing.T) {
	const policy = `{"deny":["0.0.0.0/0"]}`
	status := func(s string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.NodeName = "node-a"
			if s != "" {
				p.Annotations = map[string]string{egress.StatusAnnotation: s}
			}
		}
	}
	hash := egresspolicy.Hash(policy)
	pending := &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonEgressPending,
		`Waiting for the egress component of node "node-a" to apply the policy (is paddock-egress running there?)`}
	for _, tc := range []struct {
		name    string
		policed bool
		pod     *corev1.Pod
		want    *cond
	}{
		{"no policy", false, ownedPod(status(`{"policy":"` + hash + `","applied":true}`)), nil},
		{"no pod", true, nil, nil},
		{"not reported yet", true, ownedPod(status("")), pending},
		{"a report about another policy", true, ownedPod(status(`{"policy":"0123","applied":true}`)), pending},
		{"garbage", true, ownedPod(status(`{`)), pending},
		{"applied", true, ownedPod(status(`{"policy":"` + hash + `","applied":true}`)), &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonEgressApplied, msgEgressApplied}},
		{"rejected", true, ownedPod(status(`{"policy":"` + hash + `","applied":false,"message":"m; the previous policy stays in force"}`)),
			&cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonEgressRejected, "m; the previous policy stays in force"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := &agentsv1beta1.Sandbox{}
			if tc.policed {
				sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{egress.PolicyAnnotation: policy}
			}
			meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.SandboxConditionEgressPolicy, Status: metav1.ConditionTrue, Reason: "Stale"})
			setEgressPolicy(sb, &observation{pod: tc.pod, podOwned: tc.pod != nil})
			var got *cond
			if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionEgressPolicy); c != nil {
				got = &cond{c.Status, c.Reason, c.Message}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("EgressPolicy (-want +got):\n%s", diff)
			}
		})
	}
}
