package sandbox

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
)

const msgEgressApplied = "The node enforces the egress policy"

// setEgressPolicy reports what the node's egress component wrote on the Pod about the policy the
// Sandbox asks for now. A report about another policy (the Pod's metadata or the node still
// catching up) is Pending.
func setEgressPolicy(sb *agentsv1beta1.Sandbox, obs *observation) {
	want, policed := sb.Spec.PodTemplate.ObjectMeta.Annotations[egress.PolicyAnnotation]
	pod := obs.ownedPod()
	if !policed || pod == nil {
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionEgressPolicy)
		return
	}
	var st egress.Status
	raw, reported := pod.Annotations[egress.StatusAnnotation]
	switch {
	case !reported || json.Unmarshal([]byte(raw), &st) != nil || st.Policy != egresspolicy.Hash(want):
		setCondition(sb, agentsv1beta1.SandboxConditionEgressPolicy, metav1.ConditionUnknown, agentsv1beta1.SandboxReasonEgressPending,
			fmt.Sprintf("Waiting for the egress component of node %q to apply the policy (is paddock-egress running there?)", pod.Spec.NodeName))
	case st.Applied:
		setCondition(sb, agentsv1beta1.SandboxConditionEgressPolicy, metav1.ConditionTrue, agentsv1beta1.SandboxReasonEgressApplied, msgEgressApplied)
	default:
		setCondition(sb, agentsv1beta1.SandboxConditionEgressPolicy, metav1.ConditionFalse, agentsv1beta1.SandboxReasonEgressRejected, st.Message)
	}
}
