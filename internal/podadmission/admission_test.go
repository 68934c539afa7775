package podadmission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// failed is a Pod in phase Failed with the kubelet's reason and the given container statuses.
func failed(reason string, statuses ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason,
		Message: "Pod was rejected: ...", ContainerStatuses: statuses}}
}

var started = metav1.Unix(1700000000, 0)

func waiting() corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

func runningNow() corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
}

func exited(startedAt metav1.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, StartedAt: startedAt}}}
}

func TestRejected(t *testing.T) {
	restarted := waiting()
	restarted.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: started}
	initRan := failed("OutOfmemory")
	initRan.Status.InitContainerStatuses = []corev1.ContainerStatus{exited(started)}
	ephemeralRuns := failed("OutOfmemory")
	ephemeralRuns.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{runningNow()}
	pendingOutOfMemory := failed("OutOfmemory")
	pendingOutOfMemory.Status.Phase = corev1.PodPending

	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		// The kubelet's predicate admission (pkg/kubelet/lifecycle/predicate.go) for resources.
		{"OutOfmemory, no container status", failed("OutOfmemory"), true},
		{"OutOfcpu", failed("OutOfcpu"), true},
		{"OutOfpods", failed("OutOfpods"), true},
		{"OutOfephemeral-storage", failed("OutOfephemeral-storage"), true},
		{"OutOf an extended resource", failed("OutOfexample.com/gpu"), true},
		// Its other refusals caused by the node's state.
		{"UnexpectedAdmissionError", failed("UnexpectedAdmissionError"), true},
		{"UnknownReason", failed("UnknownReason"), true},
		{"UnexpectedPredicateFailureType", failed("UnexpectedPredicateFailureType"), true},
		{"InvalidNodeInfo", failed("InvalidNodeInfo"), true},
		{"NodeAffinity predicate", failed("NodeAffinity"), true},
		{"NodeName predicate", failed("NodeName"), true},
		{"NodePorts predicate", failed("NodePorts"), true},
		{"TaintToleration predicate", failed("TaintToleration"), true},
		{"containers waiting only", failed("OutOfmemory", waiting()), true},
		{"terminated without a start time", failed("OutOfmemory", exited(metav1.Time{})), true},
		// Refusals only a new spec fixes stay failed.
		{"PodOSNotSupported", failed("PodOSNotSupported"), false},
		{"PodOSSelectorNodeLabelDoesNotMatch", failed("PodOSSelectorNodeLabelDoesNotMatch"), false},
		{"SupplementalGroupsPolicyNotSupported", failed("SupplementalGroupsPolicyNotSupported"), false},
		// A Pod that ran and failed is the Sandbox's end, whatever its reason says.
		{"failed without a reason", failed(""), false},
		{"evicted", failed("Evicted"), false},
		{"ran then failed", failed("", exited(started)), false},
		{"OutOfmemory with a container that ran", failed("OutOfmemory", exited(started)), false},
		{"OutOfmemory with a running container", failed("OutOfmemory", runningNow()), false},
		{"OutOfmemory after a restart", failed("OutOfmemory", restarted), false},
		{"OutOfmemory after an init container ran", initRan, false},
		{"OutOfmemory with an ephemeral container running", ephemeralRuns, false},
		{"not failed", pendingOutOfMemory, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Rejected(tt.pod)); diff != "" {
				t.Errorf("Rejected() (-want +got):\n%s", diff)
			}
		})
	}
}
