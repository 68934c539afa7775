package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a Sandbox.
const (
	// SandboxConditionReady is True when the Pod runs, is Ready, has an IP, and the Service
	// exists when one is required.
	SandboxConditionReady = "Ready"
	// SandboxConditionSuspended reports whether a Suspended sandbox has shed its Pod.
	SandboxConditionSuspended = "Suspended"
	// SandboxConditionPodScheduled mirrors the Pod's PodScheduled condition while a Pod exists.
	SandboxConditionPodScheduled = "PodScheduled"
	// SandboxConditionFinished is True while the Pod is in a terminal phase.
	SandboxConditionFinished = "Finished"
)

// Reasons of the Ready condition.
const (
	SandboxReasonDependenciesReady    = "DependenciesReady"
	SandboxReasonDependenciesNotReady = "DependenciesNotReady"
	SandboxReasonSuspended            = "SandboxSuspended"
	SandboxReasonExpired              = "SandboxExpired"
	SandboxReasonReconcilerError      = "ReconcilerError"
	SandboxReasonMultiplePods         = "MultiplePods"
	// SandboxReasonImageIncompatible: the image cannot host the sandboxd injected into it (no
	// shell, runs as root, a command it does not have), as the injected sandboxd's preflight
	// reported in its termination message, or the kubelet refuses the image's user under the
	// template's runAsNonRoot. The message names the container, the cause and the fix.
	SandboxReasonImageIncompatible = "ImageIncompatible"
	// SandboxReasonInjectionInvalid: the pod template asks for sandboxd injection
	// (InjectSandboxdAnnotation) in a way the controller cannot honour (args without a command,
	// a name sandboxd's volume needs, no --sandboxd-image); no Pod is created until it is fixed.
	SandboxReasonInjectionInvalid = "InjectionInvalid"
)

// Reasons of the Ready and Finished conditions for a Pod in a terminal phase.
const (
	SandboxReasonPodSucceeded = "PodSucceeded"
	SandboxReasonPodFailed    = "PodFailed"
)

// Reasons of the Suspended condition.
const (
	SandboxReasonNotSuspended    = "NotSuspended"
	SandboxReasonPodTerminated   = "PodTerminated"
	SandboxReasonPodTerminating  = "PodTerminating"
	SandboxReasonPodNotOwned     = "PodNotOwned"
	SandboxReasonPodStateUnknown = "PodStateUnknown"
	// SandboxReasonIdle is the reason of Suspended=True when the idle controller suspended the
	// Sandbox (annotation paddock.dev/suspend-reason: Idle) rather than a user.
	SandboxReasonIdle = "Idle"
	// SandboxReasonPodNotTerminated is kept for wire compatibility; no controller sets it.
	//
	// Deprecated: use SandboxReasonPodTerminating.
	SandboxReasonPodNotTerminated = "PodNotTerminated"
)

// Reasons of the PodScheduled condition that the controller sets itself; any other reason is
// copied from the Pod.
const (
	SandboxReasonPodScheduled         = "PodScheduled"
	SandboxReasonPodSchedulingUnknown = "PodSchedulingUnknown"
)

// CannotHostSandboxd returns the Ready condition of a Sandbox whose image or pod template cannot
// host sandboxd (Ready False, reason ImageIncompatible or InjectionInvalid), nil otherwise:
// waiting will not make such a Sandbox Ready, the template has to change.
func (s *Sandbox) CannotHostSandboxd() *metav1.Condition {
	ready := meta.FindStatusCondition(s.Status.Conditions, SandboxConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse ||
		(ready.Reason != SandboxReasonImageIncompatible && ready.Reason != SandboxReasonInjectionInvalid) {
		return nil
	}
	return ready
}
