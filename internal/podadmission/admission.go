package podadmission

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// insufficientResourcePrefix starts the reason of a refusal for a resource the node lacks:
// OutOfcpu, OutOfmemory, OutOfephemeral-storage, OutOfpods, OutOf<extended resource>.
const insufficientResourcePrefix = "OutOf"

// retriableReasons are the other reasons of the kubelet's predicate admission that a node's
// state, not the Pod's spec, causes: an unexpected error, the node's info unreadable, and the
// scheduler's predicates failing on the kubelet's newer view of the node (the reason is then
// the predicate's name). Refusals that only a new spec fixes (PodOSSelectorNodeLabelDoesNotMatch,
// PodOSNotSupported, SupplementalGroupsPolicyNotSupported) are not here: such a Pod stays failed.
var retriableReasons = map[string]bool{
	"UnexpectedAdmissionError":       true,
	"UnknownReason":                  true,
	"UnexpectedPredicateFailureType": true,
	"InvalidNodeInfo":                true,
	"NodeAffinity":                   true,
	"NodeName":                       true,
	"NodePorts":                      true,
	"TaintToleration":                true,
}

// RetriableReason reports whether reason is one the kubelet gives a Pod it refused at admission
// because of the node's state.
func RetriableReason(reason string) bool {
	return strings.HasPrefix(reason, insufficientResourcePrefix) || retriableReasons[reason]
}

// Rejected reports whether the kubelet refused pod at admission for a RetriableReason and none
// of its containers ever started, so that a new Pod may replace it.
func Rejected(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed && RetriableReason(pod.Status.Reason) && !Started(pod)
}

// Started reports whether any container of pod (init, regular or ephemeral) runs or ever ran:
// its state or last termination is running, or terminated with a start time. A running state
// counts even without a start time: the doubt goes to the workload having run.
func Started(pod *corev1.Pod) bool {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if ran(cs.State) || ran(cs.LastTerminationState) {
				return true
			}
		}
	}
	return false
}

func ran(s corev1.ContainerState) bool {
	return s.Running != nil || (s.Terminated != nil && !s.Terminated.StartedAt.IsZero())
}
