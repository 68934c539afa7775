package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// ReadyStatus sets the status a controller writes for a running sandbox: Ready=True with reason
// DependenciesReady and the given pod IPs. The API server ignores status on create; write it
// through the status subresource.
func (w *SandboxWrapper) ReadyStatus(podIPs ...string) *SandboxWrapper {
	w.sb.Status.PodIPs = podIPs
	w.sb.Status.Conditions = []metav1.Condition{{
		Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue,
		Reason: agentsv1beta1.SandboxReasonDependenciesReady, Message: "Pod is Ready",
		LastTransitionTime: metav1.Now(),
	}}
	return w
}

// NotReadyStatus sets Ready=False with reason DependenciesNotReady and no pod IP.
func (w *SandboxWrapper) NotReadyStatus() *SandboxWrapper {
	w.sb.Status.PodIPs = nil
	w.sb.Status.Conditions = []metav1.Condition{{
		Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse,
		Reason: agentsv1beta1.SandboxReasonDependenciesNotReady, Message: "Pod is not Ready",
		LastTransitionTime: metav1.Now(),
	}}
	return w
}
